"""The ``gpuhost`` command."""

from __future__ import annotations

import sys

import typer

from gpuhost import __version__
from gpuhost.errors import GpuhostError

app = typer.Typer(
    name="gpuhost",
    help="Turn a Proxmox VE host with NVIDIA GPUs into a verified LLM-serving machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuhost {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Turn a Proxmox VE host with NVIDIA GPUs into a verified LLM-serving machine."""


def _register() -> None:
    # Each sub-command module adds its commands to ``app`` (or a sub-app) on import.
    # --- sub-commands (one import per line; keep sorted) ---
    from gpuhost.cli import doctor  # noqa: F401
    from gpuhost.cli import lab  # noqa: F401
    from gpuhost.cli import playbook_commands  # noqa: F401
    from gpuhost.cli import provision  # noqa: F401
    from gpuhost.cli import verify  # noqa: F401
    # --- end sub-commands ---


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps gpuhost errors to their exit codes."""
    _register()
    try:
        app(args=argv, standalone_mode=True)
    except GpuhostError as exc:  # pragma: no cover - typer normally exits first
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
