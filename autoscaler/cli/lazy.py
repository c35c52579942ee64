"""A click group whose subcommands are imported only when used."""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    """Subcommands given as ``{"name": "package.module:attribute"}``, imported on demand."""

    def __init__(self, *args, lazy_subcommands: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = dict(lazy_subcommands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_subcommands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_subcommands:
            module_name, _, attribute = self.lazy_subcommands[cmd_name].partition(":")
            return getattr(importlib.import_module(module_name), attribute)
        return super().get_command(ctx, cmd_name)
