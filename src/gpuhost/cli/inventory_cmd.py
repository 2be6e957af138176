"""``gpuhost inventory -i INV --graph|--list``: what an inventory holds, as gpuhost reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from gpuhost.cli.completion import complete_hosts
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
    host: str | None = typer.Option(
        None,
        "--host",
        metavar="NODE",
        autocompletion=complete_hosts,
        help="The node's variables as its roles receive them from the inventory (vars, its groups' vars, its own, "
        "later ones winning), each with the file:line it comes from.",
    ),
) -> None:
    """Show the inventory's groups and nodes, or one node's merged variables (as ansible-inventory --host).

    Example: gpuhost inventory -i inventory/example.yml --graph  |  gpuhost inventory -i site.yml --host pve1
    """
    from gpuhost.cli.output import console, print_json
    from gpuhost.inventory.loader import load_inventory

    def out(text: str) -> None:
        console.print(text, markup=False)

    inv = load_inventory(inventory)
    if host is not None:
        _host_vars(inv, host, as_json)
        return
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


def _host_vars(inv: Any, host: str, as_json: bool) -> None:
    """``--host NODE``: the merged inventory variables of one node and where each was written."""
    from gpuhost import yamlfile
    from gpuhost.cli.output import console, print_json
    from gpuhost.redact import redact

    if host not in inv.nodes:
        raise UsageError(f"'{host}' is not a node of {inv.path} (known: {', '.join(inv.nodes) or 'none'})")
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for values, loc in inv.var_sources(host):
        for key, value in values.items():
            merged[key] = value
            line = yamlfile.line_of(inv.document, [*loc, key])
            origins[key] = f"{inv.path}:{line}" if line else str(inv.path)
    if as_json:
        print_json({"host": host, "vars": merged, "origins": origins})
        return
    if not merged:
        console.print(f"{host}: no variables in {inv.path}", markup=False)
    width = max((len(k) for k in merged), default=0)
    for key, value in merged.items():
        shown = json.dumps(value, default=str, sort_keys=True)
        console.print(redact(f"{key:<{width}}  {shown}  ({origins[key]})"), markup=False, soft_wrap=True)
