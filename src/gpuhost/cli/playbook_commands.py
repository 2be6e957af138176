"""``gpuhost run`` and ``gpuhost facts``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from gpuhost.cli.app import app
from gpuhost.cli.output import LivePrinter, console, error, print_json, print_recap
from gpuhost.connection import open_connection
from gpuhost.errors import GpuhostError, UsageError
from gpuhost.facts.summary import gather
from gpuhost.inventory import load_inventory
from gpuhost.playbook import load_playbook
from gpuhost.runner import RunOptions, run_playbook
from gpuhost.yamlfile import parse_scalar

InventoryOpt = typer.Option(..., "-i", "--inventory", help="Inventory file (YAML).", exists=False)


def parse_extra_vars(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-e expects KEY=VALUE, got '{pair}'")
        out[key.strip()] = parse_scalar(value)
    return out


def execute_playbook(playbook: Path, inventory: Path, *, check: bool, diff: bool, limit: str | None,
                     tags: list[str], skip_tags: list[str], forks: int, allow_reboot: bool, as_json: bool,
                     extra_vars: list[str], allow_restart: bool = False,
                     preset_vars: dict[str, Any] | None = None) -> int:
    """Load, run, print; returns the exit code. Shared by every command that runs a playbook."""
    try:
        inv = load_inventory(inventory)
        book = load_playbook(playbook)
        if limit:
            inv.select(limit)  # unknown names are a usage error before anything runs
        opts = RunOptions(check=check, limit=limit, tags=frozenset(tags), skip_tags=frozenset(skip_tags),
                          forks=forks, allow_reboot=allow_reboot, allow_restart=allow_restart,
                          extra_vars={**(preset_vars or {}), **parse_extra_vars(extra_vars)},
                          on_result=None if as_json else LivePrinter(show_diff=diff, check=check))
        report = run_playbook(book, inv, opts)
    except GpuhostError as exc:
        error(str(exc))
        return exc.exit_code
    if as_json:
        print_json(report.to_json())
    else:
        print_recap(report)
    return report.exit_code


@app.command("run")
def run_command(
    playbook: Path = typer.Argument(..., help="Playbook file (YAML)."),
    inventory: Path = InventoryOpt,
    check: bool = typer.Option(False, "--check", help="Show what would change; change nothing."),
    diff: bool = typer.Option(False, "--diff", help="Show file differences."),
    limit: str | None = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list)."),
    tags: list[str] = typer.Option([], "--tags", "-t", help="Only tasks with these tags."),
    skip_tags: list[str] = typer.Option([], "--skip-tags", help="Skip tasks with these tags."),
    forks: int = typer.Option(10, "--forks", "-f", min=1, help="Hosts worked on at once."),
    allow_reboot: bool = typer.Option(False, "--allow-reboot", help="Let gpuhost reboot hosts that need it."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.run/1)."),
    extra_vars: list[str] = typer.Option([], "-e", "--extra-vars", help="KEY=VALUE, overrides every other var."),
) -> None:
    """Run a playbook against an inventory."""
    raise typer.Exit(execute_playbook(playbook, inventory, check=check, diff=diff, limit=limit, tags=tags,
                                      skip_tags=skip_tags, forks=forks, allow_reboot=allow_reboot,
                                      as_json=as_json, extra_vars=extra_vars))


@app.command("facts")
def facts_command(
    host: str = typer.Argument(..., help="A node of the inventory."),
    inventory: Path = InventoryOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show what gpuhost knows about a node."""
    try:
        inv = load_inventory(inventory)
        if host not in inv.nodes:
            raise UsageError(f"'{host}' is not a node of {inventory}")
        with open_connection(inv.nodes[host]) as conn:
            facts = gather(conn)
    except GpuhostError as exc:
        error(str(exc))
        raise typer.Exit(exc.exit_code) from None
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
