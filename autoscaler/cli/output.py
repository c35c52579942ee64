"""Printing for the CLI: JSON for scripts, rich tables for people (rich loads lazily)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click

PIPE_WIDTH = 200
PLAIN_TABLE_ROWS = 200
"""Longer tables print as plain aligned columns: rich lays out about 2,000 rows a second."""


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A rich table on stdout; cells are stringified, ``None`` shows as a dash."""
    cells = [["-" if cell is None else str(cell) for cell in row] for row in rows]
    if len(cells) > PLAIN_TABLE_ROWS:
        _print_plain_table(title, columns, cells)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in cells:
        table.add_row(*row)
    # A pipe gets full rows rather than rich's 80-column default.
    Console(width=None if sys.stdout.isatty() else PIPE_WIDTH).print(table)


def _print_plain_table(title: str, columns: Sequence[str], cells: list[list[str]]) -> None:
    rows = [list(columns), *cells]
    widths = [max(len(text) for text in column) for column in zip(*rows, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    click.echo("\n".join([title, *(line.rstrip() for line in lines)]))


def format_quantity(value: float) -> str:
    """``2.0`` -> ``2``, ``0.25`` -> ``0.25``, bytes stay integral."""
    return f"{value:g}" if not float(value).is_integer() else str(int(value))


def format_bytes(value: float) -> str:
    gib = value / 2**30
    return f"{gib:.1f} GiB"
