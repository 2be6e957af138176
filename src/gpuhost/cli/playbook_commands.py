"""``gpuhost run`` and ``gpuhost facts``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuhost.cli.completion import complete_hosts
from gpuhost.cli.flags import RunFlags, run_flags
from gpuhost.cli.playbook_run import InventoryOpt, VerboseOpt, run_with_flags
from gpuhost.cli.root import app
from gpuhost.errors import GpuhostError, UsageError


@app.command("run")
@run_flags
def run_command(
    playbook: Path = typer.Argument(..., help="Playbook file (YAML)."),
    inventory: Path = InventoryOpt,
    *,
    flags: RunFlags,
) -> None:
    """Run a playbook against an inventory.

    Example: gpuhost run playbooks/example.yml -i inventory/site.yml --check --diff
    """
    raise typer.Exit(run_with_flags(playbook, inventory, flags))


@app.command("facts")
def facts_command(
    host: str = typer.Argument(
        ...,
        metavar="HOSTS",
        help="A node, a group, all, or a pattern (as --limit: globs, !exclusions).",
        autocompletion=complete_hosts,
    ),
    inventory: Path = InventoryOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    verbose: bool = VerboseOpt,
) -> None:
    """Show what gpuhost knows about nodes: the host, its GPUs and driver, and its guests (pct list, qm list).

    Example: gpuhost facts pve1 -i inventory/site.yml  |  gpuhost facts all -i inventory/site.yml --json
    """
    from rich.text import Text

    from gpuhost.cli.output import console, print_json
    from gpuhost.facts.summary import summary
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.pve.guest_lists import pct_rows, qm_rows
    from gpuhost.runner.connect import open_connection, read_fact

    if verbose:
        from gpuhost.cli import verbose as verbose_log

        verbose_log.enable()
    inv = load_inventory(inventory)
    names = [host] if host in inv.nodes else inv.select(host)  # an unknown name or pattern: a usage error
    if not names:
        raise UsageError(f"'{host}' selects no node of {inventory}")
    found: dict[str, dict[str, Any]] = {}
    failed = False
    for name in names:
        try:
            with open_connection(inv.nodes[name]) as conn:
                facts = read_fact(conn, summary)
                cts = conn.run("command -v pct >/dev/null && pct list || true", check=False).stdout
                vms = conn.run("command -v qm >/dev/null && qm list || true", check=False).stdout
            facts["guests"] = [f"CT {r.vmid} {r.name or '-'} {r.status}" for r in pct_rows(cts)] + [
                f"VM {r.vmid} {r.name or '-'} {r.status}" for r in qm_rows(vms)
            ]
            found[name] = facts
        except GpuhostError as exc:
            if len(names) == 1:
                raise
            found[name] = {"error": str(exc)}
            failed = True
    if as_json:
        print_json({"host": names[0], "facts": found[names[0]]} if host in inv.nodes else {"hosts": found})
        raise typer.Exit(1 if failed else 0)
    for name, facts in found.items():
        if len(names) > 1:
            console.print(Text(f"== {name}", style="bold"))
        for key, value in facts.items():
            if key in ("gpus", "guests") and isinstance(value, list):
                console.print(Text(f"{key:<24}", style="bold") + Text(str(len(value))))
                for item in value:
                    console.print(Text(f"{'':<24}{item}"))
                continue
            shown = " ".join(value) if isinstance(value, list) else ("-" if value is None else str(value))
            console.print(Text(f"{key:<24}", style="bold") + Text(shown))
    raise typer.Exit(1 if failed else 0)
