"""Group Preference Optimization (GPO) as a prbench scorer plugin."""

__version__ = "0.1.0"
