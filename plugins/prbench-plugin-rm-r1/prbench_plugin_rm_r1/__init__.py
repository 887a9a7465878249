"""prbench plugin: the RM-R1 reasoning reward models as a pairwise judge (and a scalar mode)."""

__version__ = "0.1.0"
