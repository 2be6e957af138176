"""``gpuhost run`` and ``gpuhost facts``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuhost.cli.flags import RunFlags, run_flags
from gpuhost.cli.root import app
from gpuhost.errors import UsageError

InventoryOpt = typer.Option(..., "-i", "--inventory", help="Inventory file (YAML).", exists=False)
VerboseOpt = typer.Option(False, "--verbose", "-v", help="Show each remote command and its timing.")


def parse_extra_vars(pairs: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``-e KEY=VALUE`` pairs → values and their origins (``-e:N`` in error messages)."""
    from gpuhost.playbook.variables import Origin
    from gpuhost.yamlfile import parse_scalar

    out: dict[str, Any] = {}
    origins: dict[str, Any] = {}
    for i, pair in enumerate(pairs, start=1):
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key or not key.isidentifier():
            from gpuhost.errors import ConfigError

            raise ConfigError(
                "expects KEY=VALUE with KEY a variable name",
                file="-e",
                line=i,
                field=pair.split("=", 1)[0][:40] or None,
            )
        out[key] = parse_scalar(value)
        origins[key] = Origin("-e", line_no=i)
    return out, origins


def run_with_flags(playbook: Path, inventory: Path, flags: RunFlags, preset_vars: dict[str, Any] | None = None) -> int:
    """Load, run, print; returns the run's exit code. Errors are raised for the one handler in ``main``."""
    from gpuhost.cli.output import LivePrinter, print_json, print_recap
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.playbook.loader import load_playbook
    from gpuhost.runner.run import RunOptions, run_playbook

    if flags.verbose:
        from gpuhost.cli import verbose

        verbose.enable()
    from gpuhost.playbook.variables import Origin

    inv = load_inventory(inventory)
    book = load_playbook(playbook)
    if flags.limit:
        inv.select(flags.limit)  # unknown names are a usage error before anything runs
    extra, origins = parse_extra_vars(flags.extra_vars)
    preset = preset_vars or {}
    opts = RunOptions(
        check=flags.check,
        limit=flags.limit,
        tags=frozenset(flags.tags),
        skip_tags=frozenset(flags.skip_tags),
        forks=flags.forks,
        allow_reboot=flags.allow_reboot,
        allow_restart=flags.allow_restart,
        extra_vars={**preset, **extra},
        extra_origins={**{k: Origin(f"--{k.removeprefix('lxc_')}") for k in preset}, **origins},
        on_result=None if flags.as_json else LivePrinter(show_diff=flags.diff, check=flags.check),
    )
    report = run_playbook(book, inv, opts)
    if flags.as_json:
        print_json(report.to_json())
    else:
        print_recap(report, round_trips=flags.verbose)
    return report.exit_code


def execute_playbook(
    playbook: Path,
    inventory: Path,
    *,
    check: bool,
    diff: bool,
    limit: str | None,
    tags: list[str],
    skip_tags: list[str],
    forks: int,
    allow_reboot: bool,
    as_json: bool,
    extra_vars: list[str],
    allow_restart: bool = False,
    preset_vars: dict[str, Any] | None = None,
    verbose: bool = False,
) -> int:
    """Keyword form of :func:`run_with_flags`, for callers that do not hold a :class:`RunFlags`."""
    flags = RunFlags(
        check=check,
        diff=diff,
        limit=limit,
        tags=tags,
        skip_tags=skip_tags,
        forks=forks,
        allow_reboot=allow_reboot,
        allow_restart=allow_restart,
        as_json=as_json,
        extra_vars=extra_vars,
        verbose=verbose,
    )
    return run_with_flags(playbook, inventory, flags, preset_vars)


@app.command("run")
@run_flags
def run_command(
    playbook: Path = typer.Argument(..., help="Playbook file (YAML)."),
    inventory: Path = InventoryOpt,
    *,
    flags: RunFlags,
) -> None:
    """Run a playbook against an inventory."""
    raise typer.Exit(run_with_flags(playbook, inventory, flags))


@app.command("facts")
def facts_command(
    host: str = typer.Argument(..., help="A node of the inventory."),
    inventory: Path = InventoryOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    verbose: bool = VerboseOpt,
) -> None:
    """Show what gpuhost knows about a node."""
    from rich.text import Text

    from gpuhost.cli.output import console, print_json
    from gpuhost.facts.summary import summary
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.runner.connect import open_connection, read_fact

    if verbose:
        from gpuhost.cli import verbose as verbose_log

        verbose_log.enable()
    inv = load_inventory(inventory)
    if host not in inv.nodes:
        raise UsageError(f"'{host}' is not a node of {inventory}")
    with open_connection(inv.nodes[host]) as conn:
        facts = read_fact(conn, summary)
    if as_json:
        print_json({"host": host, "facts": facts})
        return
    for key, value in facts.items():
        if key == "gpus" and isinstance(value, list):
            console.print(Text(f"{key:<24}", style="bold") + Text(str(len(value))))
            for gpu in value:
                console.print(Text(f"{'':<24}{gpu}"))
            continue
        shown = " ".join(value) if isinstance(value, list) else ("-" if value is None else str(value))
        console.print(Text(f"{key:<24}", style="bold") + Text(shown))
