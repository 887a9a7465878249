"""Subcommands of the ``prbench`` CLI: one module each, ``eval`` and ``build`` included.

See :mod:`prbench.cli` for the common command-line style every subcommand gets.
"""
