"""The ``autoscale`` command line.

Subcommands load lazily so ``autoscale node detect`` imports only what detection needs.
Every failure a user can cause ends as one clear message and a non-zero exit; tracebacks
appear only with ``--debug``.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from typing import NoReturn

import click

from accel.user_input import clip
from autoscaler.cli.lazy import LazyGroup

DEBUG_ENV_VAR = "AUTOSCALE_DEBUG"
OUR_PACKAGES = {"accel", "instance_catalog", "providers", "autoscaler"}
MAX_ERROR_LINE = 500
"""Characters of one error-message line; click quotes bad option values whole."""
ENDS_AT_ONCE = frozenset({"plan"})
"""Short commands that hold nothing once they have printed (offline: no threads, servers or
open files). Run from the console, they run without the cyclic garbage collector (importing
numpy, pydantic and HiGHS allocates much and frees little: its passes there took 20-60 ms;
a 100,000-bundle plan peaks at the same memory without it), and their process ends as soon
as they succeed, its output flushed, without the interpreter's teardown (freeing that state
and the plan's objects: 50-100 ms), unless a profiler or coverage tool watches it. On a
2-core machine, what ``autoscale plan`` adds to its planning went from 0.32-0.46 s to
0.24-0.31 s."""


class RootGroup(LazyGroup):
    """The ``autoscale`` group: no error line, whoever wrote it, echoes huge input whole;
    ``finished``: the subcommand that last succeeded."""

    finished: str | None = None

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name, command, rest = super().resolve_command(ctx, args)
        if name not in ENDS_AT_ONCE:
            gc.enable()  # off from the start of :func:`main` (on already where it is not run)
        return name, command, rest

    def invoke(self, ctx: click.Context):
        try:
            result = super().invoke(ctx)
        except click.ClickException as err:
            err.message = "\n".join(clip(line, MAX_ERROR_LINE) for line in err.message.split("\n"))
            raise
        self.finished = ctx.invoked_subcommand
        return result


@click.group(
    cls=RootGroup,
    lazy_subcommands={
        "node": "autoscaler.cli.node:node",
        "catalog": "autoscaler.cli.catalog:catalog",
        "plan": "autoscaler.cli.plan:plan",
        "up": "autoscaler.cli.cluster:up",
        "request": "autoscaler.cli.cluster:request",
        "monitor": "autoscaler.cli.cluster:monitor",
        "status": "autoscaler.cli.cluster:status",
        "down": "autoscaler.cli.cluster:down",
        "logs": "autoscaler.cli.logs:logs",
        "quickstart": "autoscaler.cli.quickstart:quickstart",
    },
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("--debug", is_flag=True, envvar=DEBUG_ENV_VAR, help="Debug logs and tracebacks.")
@click.option("-v", "--verbose", is_flag=True, help="Informational logs on stderr.")
@click.version_option(package_name="accel-autoscaler")
def cli(debug: bool, verbose: bool) -> None:
    """Autoscale accelerator clusters (GPU, TPU, Trainium/Inferentia, Gaudi, Ascend)."""
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def main() -> None:
    """Console entry point: unexpected errors become one line unless ``--debug``."""
    debug = "--debug" in sys.argv[1:] or bool(os.environ.get(DEBUG_ENV_VAR))
    gc.disable()  # for the commands that end at once (ENDS_AT_ONCE); others turn it on again
    try:
        cli.main(prog_name="autoscale", standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except ModuleNotFoundError as err:
        if debug or not err.name or err.name.split(".")[0] in OUR_PACKAGES:
            raise
        from autoscaler.extras import missing_line

        click.echo(f"Error: {missing_line(err.name)}", err=True)
        sys.exit(1)
    except Exception as err:
        if debug:
            raise
        click.echo(f"Error: {type(err).__name__}: {err} (run with --debug for details)", err=True)
        sys.exit(1)
    if cli.finished in ENDS_AT_ONCE and sys.gettrace() is None and sys.getprofile() is None:
        _end_now()  # (a profiler or coverage tool, watching, writes its results at exit)


def _end_now() -> NoReturn:
    """Exit 0 here, once logging and the output are flushed (120 where the output cannot be,
    e.g. a closed pipe, as Python's own exit reports it)."""
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        os._exit(120)
    os._exit(0)
