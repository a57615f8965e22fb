"""Plain-text tables for the command line: columns padded to their widest cell."""

from __future__ import annotations

from collections.abc import Sequence


def print_rows(rows: Sequence[Sequence[str]]) -> None:
    """Print `rows` (the first one the header) with each column as wide as its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
