"""The run flags every playbook-running command takes, defined once.

``@run_flags`` adds them to a command's signature (typer reads it) and hands the command one
:class:`RunFlags` as its ``flags`` argument::

    @app.command("run")
    @run_flags
    def run_command(playbook: Path = typer.Argument(...), *, flags: RunFlags) -> None: ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import typer

from gpuhost.cli.completion import complete_hosts

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class RunFlags:
    check: bool = False
    diff: bool = False
    limit: str | None = None
    tags: list[str] = field(default_factory=list)
    skip_tags: list[str] = field(default_factory=list)
    forks: int = 10
    lock_wait: float = 10.0
    allow_reboot: bool = False
    allow_restart: bool = False
    as_json: bool = False
    extra_vars: list[str] = field(default_factory=list)
    verbose: bool = False
    json_events: bool = False
    log: Path | None = None
    list_hosts: bool = False
    list_tasks: bool = False
    list_tags: bool = False
    start_at_task: str | None = None
    serial: int | None = None
    reboot_serving: list[str] = field(default_factory=list)
    max_fail_percentage: int | None = None


@dataclass(frozen=True)
class Preset:
    """A role variable a command's own flag sets (``--ctid`` sets ``lxc_ctids``); an error about its value
    names the flag the operator typed."""

    var: str
    value: Any
    flag: str


#: name → (type typer parses, typer.Option); the order is the order ``--help`` lists them in.
_OPTIONS: dict[str, tuple[Any, Any]] = {
    "check": (bool, typer.Option(False, "--check", help="Show what would change; change nothing.")),
    "diff": (bool, typer.Option(False, "--diff", help="Show file differences.")),
    "limit": (
        str | None,
        typer.Option(
            None,
            "--limit",
            "-l",
            help="Only these nodes or groups: comma list, globs (pve*), exclusions (!pve3), @FILE (a retry list).",
        ),
    ),
    "tags": (list[str], typer.Option([], "--tags", "-t", help="Only tasks with these tags.")),
    "skip_tags": (list[str], typer.Option([], "--skip-tags", help="Skip tasks with these tags.")),
    "forks": (int, typer.Option(10, "--forks", "-f", min=1, help="Hosts worked on at once.")),
    "lock_wait": (
        float,
        typer.Option(
            10.0, "--lock-wait", min=0, help="Seconds to wait for another gpuhost run's lock on a node, then fail."
        ),
    ),
    "allow_reboot": (bool, typer.Option(False, "--allow-reboot", help="Reboot nodes whose kernel must restart.")),
    "allow_restart": (
        bool,
        typer.Option(False, "--allow-restart", help="Restart running containers whose devices changed."),
    ),
    "as_json": (bool, typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.run/1).")),
    "extra_vars": (
        list[str],
        typer.Option(
            [],
            "-e",
            "--extra-vars",
            help="KEY=VALUE (a string), a JSON mapping or @vars.yml; overrides every other var (-e gpu_path=vm).",
        ),
    ),
    "verbose": (bool, typer.Option(False, "--verbose", "-v", help="Show each remote command and its timing.")),
    "json_events": (
        bool,
        typer.Option(
            False, "--json-events", help="Print one JSON object per task as it ends (schema gpuhost.events/1)."
        ),
    ),
    "log": (Path | None, typer.Option(None, "--log", help="Append the whole run, redacted, to this file.")),
    "list_hosts": (
        bool,
        typer.Option(False, "--list-hosts", help="List the hosts each play would run on; run nothing."),
    ),
    "list_tasks": (
        bool,
        typer.Option(False, "--list-tasks", help="List each host's tasks (reads facts, changes nothing); run nothing."),
    ),
    "list_tags": (bool, typer.Option(False, "--list-tags", help="List the tags --tags can pick; run nothing.")),
    "start_at_task": (
        str | None,
        typer.Option(None, "--start-at-task", help="Skip the tasks before the first one of this name."),
    ),
    "serial": (
        int | None,
        typer.Option(None, "--serial", min=1, help="Hosts at a time, batch after batch (a rolling reboot: 1)."),
    ),
    "reboot_serving": (
        list[str],
        typer.Option([], "--reboot-serving", help="This node may reboot although it serves a model (repeat)."),
    ),
    "max_fail_percentage": (
        int | None,
        typer.Option(
            None,
            "--max-fail-percentage",
            min=0,
            max=100,
            help="Stop a rolling run after a batch in which more than this percent of hosts failed (0: any).",
        ),
    ),
}
assert list(_OPTIONS) == [f.name for f in fields(RunFlags)]

#: what ``--help`` shows for a value (a flag shows none, see :func:`gpuhost.cli.root._quiet_flags`)
_METAVARS = {
    "limit": "PATTERN",
    "tags": "TAG",
    "skip_tags": "TAG",
    "forks": "N",
    "extra_vars": "KEY=VALUE|JSON|@FILE",
    "log": "FILE",
    "start_at_task": "NAME",
    "serial": "N",
    "reboot_serving": "NODE",
    "max_fail_percentage": "PERCENT",
}
for _name, _metavar in _METAVARS.items():
    _OPTIONS[_name][1].metavar = _metavar

#: node and group names complete from the inventory (``gpuhost --install-completion``)
_OPTIONS["limit"][1].autocompletion = complete_hosts

#: ``GPUHOST_*`` environment variables (and ``gpuhost.toml`` keys, see :mod:`gpuhost.cli.config`)
_OPTIONS["forks"][1].envvar = "GPUHOST_FORKS"
_OPTIONS["log"][1].envvar = "GPUHOST_LOG"

FLAG_OPTIONS = tuple(_OPTIONS)


def run_flags(func: F | None = None, *, without: tuple[str, ...] = (), helps: dict[str, str] | None = None) -> Any:
    """Give ``func`` the shared run flags; it receives them as ``flags: RunFlags``.

    ``@run_flags(without=("allow_reboot",), helps={"allow_restart": "…"})``: a command that has no use for a flag
    does not show it (the flag keeps its default), and a flag can say what it means for this command."""
    if func is None:
        return lambda f: _with_run_flags(f, without, helps or {})
    return _with_run_flags(func, without, helps or {})


def _with_run_flags(func: F, without: tuple[str, ...], helps: dict[str, str]) -> F:
    import copy

    unknown = (set(without) | set(helps)) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"{func.__name__}: {sorted(unknown)} are not run flags")
    options: dict[str, tuple[Any, Any]] = {}
    for name, (annotation, option) in _OPTIONS.items():
        if name in without:
            continue
        if name in helps:
            option = copy.copy(option)
            option.help = helps[name]
        options[name] = (annotation, option)
    sig = inspect.signature(func, eval_str=True)
    own = [p for p in sig.parameters.values() if p.name != "flags"]
    clash = {p.name for p in own} & set(_OPTIONS)
    if clash:
        raise TypeError(f"{func.__name__}: parameters {sorted(clash)} are run flags already")
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
        for name, (annotation, option) in options.items()
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = RunFlags(**{name: kwargs.pop(name) for name in options if name in kwargs})
        return func(*args, flags=flags, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=[*own, *shared])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{p.name: p.annotation for p in own},
        **{name: annotation for name, (annotation, _) in options.items()},
    }
    del wrapper.__wrapped__  # typer must see the new signature, not the original
    return wrapper  # type: ignore[return-value]
