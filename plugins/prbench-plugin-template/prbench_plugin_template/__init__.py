"""A minimal prbench plugin: one deterministic scorer."""

__version__ = "0.1.0"
