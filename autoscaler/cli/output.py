"""Printing for the CLI: JSON for scripts, rich tables for people (rich loads lazily)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click

PIPE_WIDTH = 200


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A rich table on stdout; cells are stringified, ``None`` shows as a dash."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("-" if cell is None else str(cell) for cell in row))
    # A pipe gets full rows rather than rich's 80-column default.
    Console(width=None if sys.stdout.isatty() else PIPE_WIDTH).print(table)


def format_quantity(value: float) -> str:
    """``2.0`` -> ``2``, ``0.25`` -> ``0.25``, bytes stay integral."""
    return f"{value:g}" if not float(value).is_integer() else str(int(value))


def format_bytes(value: float) -> str:
    gib = value / 2**30
    return f"{gib:.1f} GiB"
