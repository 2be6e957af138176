"""``gpuhost inventory -i INV --graph|--list``: what an inventory holds, as gpuhost reads it."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuhost.cli.root import app
from gpuhost.errors import UsageError


@app.command("inventory")
def inventory_command(
    inventory: Path = typer.Option(
        ..., "-i", "--inventory", help="Inventory file (YAML).", envvar="GPUHOST_INVENTORY", metavar="FILE"
    ),
    graph: bool = typer.Option(False, "--graph", help="Groups and their nodes as a tree (plain ASCII)."),
    limit: str | None = typer.Option(None, "--limit", "-l", help="Only these nodes (same patterns as run)."),
    as_json: bool = typer.Option(False, "--json", help="Nodes, groups and their addresses as JSON."),
) -> None:
    """Show the inventory's groups and nodes.

    Example: gpuhost inventory -i inventory/example.yml --graph
    """
    from gpuhost.cli.output import console, print_json
    from gpuhost.inventory.loader import load_inventory

    def out(text: str) -> None:
        console.print(text, markup=False)

    inv = load_inventory(inventory)
    names = inv.select(limit) if limit else list(inv.nodes)
    if as_json:
        print_json(
            {
                "nodes": {n: {"address": inv.nodes[n].address, "groups": list(inv.nodes[n].groups)} for n in names},
                "groups": {g: [n for n in spec.nodes if n in names] for g, spec in inv.groups.items()},
            }
        )
        return
    if not graph:
        for n in names:
            out(f"{n}  {inv.nodes[n].address}")
        return
    grouped = {n for spec in inv.groups.values() for n in spec.nodes}
    out("@all:")
    for gname, spec in inv.groups.items():
        members = [n for n in spec.nodes if n in names]
        if limit and not members:
            continue
        out(f"  |--@{gname}:")
        for n in members:
            out(f"  |  |--{n}")
    ungrouped = [n for n in names if n not in grouped]
    if ungrouped:
        out("  |--@ungrouped:")
        for n in ungrouped:
            out(f"  |  |--{n}")
    if not names:
        raise UsageError(f"--limit {limit} selects no node")
