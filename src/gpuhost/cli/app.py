"""The ``gpuhost`` command: the root app, its global flags and the one error handler.

Command modules import only typer and light constants at module level; each command imports
the machinery it needs inside its function, so ``gpuhost --help`` starts fast.
"""

from __future__ import annotations

import sys

import typer

app = typer.Typer(
    name="gpuhost",
    help="Turn a Proxmox VE host with NVIDIA GPUs into a verified LLM-serving machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _State:
    debug = False


state = _State()


def _version(value: bool) -> None:
    if value:
        from gpuhost.cli.version import version_text

        typer.echo(version_text())
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the versions of gpuhost, Python, paramiko and proxmoxer, and exit.",
    ),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an internal error."),
) -> None:
    """Turn a Proxmox VE host with NVIDIA GPUs into a verified LLM-serving machine."""
    state.debug = debug


def _register() -> None:
    # Each sub-command module adds its commands to ``app`` (or a sub-app) on import.
    # --- sub-commands (one import per line; keep sorted) ---
    from gpuhost.cli import (
        bench,  # noqa: F401
        doctor,  # noqa: F401
        lab,  # noqa: F401
        playbook_commands,  # noqa: F401
        provision,  # noqa: F401
        verify,  # noqa: F401
    )
    # --- end sub-commands ---


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every error leaves through :func:`gpuhost.cli.failures.report`."""
    _register()
    state.debug = False
    try:
        app(args=argv, standalone_mode=True)
    except Exception as exc:  # SystemExit (typer.Exit, usage errors) passes through
        from gpuhost.cli.failures import report

        sys.exit(report(exc, debug=state.debug))
