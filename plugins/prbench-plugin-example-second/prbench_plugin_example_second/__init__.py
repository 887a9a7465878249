"""A second small prbench plugin: a profile-aware scorer and a task folder."""

__version__ = "0.1.0"
