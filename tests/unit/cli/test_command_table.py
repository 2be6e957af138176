"""The lazy command table names every top-level command, and the module it names really adds it: a run that
imports only that module finds its command (a missing entry made ``gpuhost inventory`` load every module)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
from typer import _click as tclick

from gpuhost.cli.app import COMMAND_MODULES, _register, app

#: the top-level commands as ``gpuhost --help`` lists them (read from the help of this version)
COMMANDS = [
    "bench",
    "capture",
    "config",
    "doc",
    "doctor",
    "facts",
    "inventory",
    "lab",
    "launch",
    "provision",
    "run",
    "serve",
    "shell",
    "tune",
    "verify",
]


def _top_level() -> list[str]:
    _register([])
    root = typer.main.get_command(app)
    return sorted(root.list_commands(tclick.core.Context(root, info_name="gpuhost")))  # type: ignore[attr-defined]


def test_the_table_lists_every_command_of_the_cli() -> None:
    assert _top_level() == COMMANDS
    assert sorted(COMMAND_MODULES) == COMMANDS


@pytest.mark.parametrize("name", COMMANDS)
def test_importing_only_the_tabled_module_registers_the_command(name: str) -> None:
    code = (
        "import sys, typer\n"
        "from typer import _click as c\n"
        "from gpuhost.cli.app import _register, app\n"
        f"_register([{name!r}])\n"
        "root = typer.main.get_command(app)\n"
        "print(' '.join(root.list_commands(c.core.Context(root))))\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('gpuhost.cli.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    commands, modules = out.splitlines()
    assert name in commands.split()
    loaded = {m.removeprefix("gpuhost.cli.") for m in modules.split()}
    others = set(COMMAND_MODULES.values()) - {COMMAND_MODULES[name]}
    assert not loaded & others, f"gpuhost {name} imported other command modules: {sorted(loaded & others)}"
