"""Subcommands of the ``prbench`` CLI: one module each, ``eval`` and ``build`` included.

See :mod:`prbench.cli` for the common command-line style every subcommand gets.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """The ``type=`` of an option that takes a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_number(text: str) -> float:
    """The ``type=`` of an option that takes a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value
