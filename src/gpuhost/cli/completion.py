"""Shell completion of node and group names (``gpuhost --install-completion`` turns it on).

The inventory is the one the command line names (``-i``) or ``GPUHOST_INVENTORY`` (``gpuhost.toml``'s
``inventory`` sets it); a completion never fails: an unreadable inventory completes nothing.
"""

from __future__ import annotations

import os
from typing import Any


def host_names(inventory: str | os.PathLike[str] | None) -> list[str]:
    """``all``, the groups and the nodes of ``inventory``, or nothing when it cannot be read."""
    if not inventory:
        return []
    try:
        from gpuhost.inventory.loader import load_inventory

        inv = load_inventory(os.fspath(inventory))
    except Exception:  # noqa: BLE001 - a completion must never print an error into the operator's shell
        return []
    return ["all", *inv.groups, *inv.nodes]


def complete_hosts(ctx: Any, incomplete: str) -> list[str]:
    """typer ``autocompletion``: the names that start with what was typed (after a ``!`` or the last comma)."""
    params = getattr(ctx, "params", {}) or {}
    inventory = params.get("inventory") or os.environ.get("GPUHOST_INVENTORY")
    head, sep, word = incomplete.rpartition(",")
    prefix = head + sep
    bang = "!" if word.startswith("!") else ""
    word = word.removeprefix("!")
    return [prefix + bang + n for n in host_names(inventory) if n.startswith(word)]
