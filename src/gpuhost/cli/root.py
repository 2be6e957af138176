"""The root ``gpuhost`` typer app and its global flags; command modules add themselves to :data:`app`.

Command modules import only typer and light constants at module level; each command imports
the machinery it needs inside its function, so ``gpuhost --help`` starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
import typer.core

if TYPE_CHECKING:
    import click  # typer 0.28 vendors its own (typer._click): the real one is not imported at run time


def _quiet_flags() -> None:
    """``--help`` shows a value's type (``<path>``) but not ``<bool>`` after every flag."""
    shown = getattr(typer.core.TyperOption, "display_type_rich", None)
    if shown is None:
        return

    def display_type_rich(self: typer.core.TyperOption, ctx: click.Context) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    setattr(typer.core.TyperOption, "display_type_rich", display_type_rich)  # noqa: B010  (absent in older typer)


_quiet_flags()


def _named_metavars() -> None:
    """A value without its own metavar is shown by what it is, as Ansible's help does (``-l LIMIT``,
    ``--lines N``, ``-i FILE``), not by its Python type (``<str>``, ``<int>``, ``<path>``)."""
    original = typer.core.TyperOption.make_metavar

    def make_metavar(self: typer.core.TyperOption, ctx: Any) -> str:  # typer's own click Context
        if self.metavar is not None or self.is_flag:
            return original(self, ctx)
        kind = self.type.name
        name = (self.name or "value").lower()
        if kind in ("int", "float", "int range", "float range"):
            return "SECONDS" if "timeout" in name else "N"
        if kind == "path":
            return "DIR" if name == "out" or "dir" in name else "FILE"
        if kind == "str":
            return name.upper()
        return original(self, ctx)

    typer.core.TyperOption.make_metavar = make_metavar  # type: ignore[method-assign]


_named_metavars()


def _plain_when_piped() -> None:
    """Help and usage errors read by a log or CI (stdout not a terminal) come as plain text, without
    rich's boxes; on a terminal they keep rich's layout."""
    import sys

    if not sys.stdout.isatty():
        typer.core.HAS_RICH = False


_plain_when_piped()

app = typer.Typer(
    name="gpuhost",
    help="Turn a Proxmox VE host with NVIDIA GPUs into a verified LLM-serving machine.",
    no_args_is_help=True,
    add_completion=True,
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
