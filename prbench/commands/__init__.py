"""Subcommands of the ``prbench`` CLI (see :mod:`prbench.cli`)."""
