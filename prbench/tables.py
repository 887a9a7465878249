"""Tables of text cells, written as Markdown or as aligned plain text: the one table writer.

A command builds its table as data -- a head and rows of strings -- and writes it with
:func:`markdown_table` or :func:`text_table`; ``prbench report`` puts the same data into its HTML
and Markdown pages (a ``("table", head, rows)`` block), so no table is written as text and parsed
back. The Best-of-N, correlation, sensitivity, dataset statistics and sweep tables go through
here.

Written here rather than taken from a library (lm-eval installs ``pytablewriter`` and ``tabulate``):
the tables are a few lines each, their exact bytes are what users diff and tests pin, and the
plain-text form keeps prbench's two-space gap. Ground floor: imports nothing from prbench.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["markdown_table", "text_table"]


def _check(head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    for i, row in enumerate(rows):
        if len(row) != len(head):
            raise ValueError(f"table row {i} has {len(row)} cells for {len(head)} columns")


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown (GitHub) table: ``| a | b |``, then ``|---|---|``, then one line per row.

    Cells are written as given (no escaping, no padding); no line end after the last row.

    Raises:
        ValueError: a row with another number of cells than ``head``.
    """
    _check(head, rows)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(head: Sequence[str], rows: Sequence[Sequence[str]], *, rule: bool = False,
               strip: bool = False) -> str:
    """An aligned plain-text table: each column left-aligned to its widest cell, two spaces apart.

    Args:
        head: the column names (the first line).
        rows: the cells, one sequence per line.
        rule: a line of dashes (one run per column) under the head.
        strip: cut the spaces that pad the last column (no trailing blanks).

    Raises:
        ValueError: a row with another number of cells than ``head``.
    """
    _check(head, rows)
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        text = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
        return text.rstrip() if strip else text

    lines = [line(head)]
    if rule:
        lines.append("  ".join("-" * w for w in widths))
    lines += [line(row) for row in rows]
    return "\n".join(lines)
