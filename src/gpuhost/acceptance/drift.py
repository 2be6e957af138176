"""``--drift``: what changed on a node since the last provision (versions, command lines, configs).

A snapshot is a flat mapping of names to texts, read in one round trip per node
(:data:`~gpuhost.facts.snapshot.state_snapshot`), stored on the controller under
``$XDG_STATE_HOME/gpuhost/<inventory-hash>/<node>.json`` (default ``~/.local/state``). ``gpuhost provision``
reads it at the end of a successful run and writes it; ``--drift`` compares.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuhost.connection.base import Connection
from gpuhost.facts.snapshot import state_snapshot
from gpuhost.inventory.loader import Inventory

SCHEMA = "gpuhost.snapshot/1"


def snapshot_read(inventory: Inventory, node: str) -> tuple[Any, ...]:
    """The fact key of ``node``'s snapshot with every container of its inventory entry (what a run reads at its end
    for ``gpuhost provision``: :attr:`gpuhost.runner.run.RunOptions.snapshot`)."""
    return (state_snapshot, *sorted(inventory.nodes[node].containers))


def take(conn: Connection, containers: list[int]) -> dict[str, str]:
    """The node's snapshot now (one round trip)."""
    from gpuhost.runner.connect import read_fact

    return read_fact(conn, state_snapshot, *containers)


def state_dir(inventory_path: Path) -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    digest = hashlib.sha256(str(inventory_path.resolve()).encode()).hexdigest()[:16]
    return base / "gpuhost" / digest


def snapshot_path(inventory: Inventory, node: str) -> Path:
    return state_dir(inventory.path) / f"{node}.json"


def save(inventory: Inventory, node: str, values: dict[str, str]) -> Path:
    path = snapshot_path(inventory, node)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    doc = {"schema": SCHEMA, "node": node, "taken": datetime.now(UTC).isoformat(timespec="seconds"), "values": values}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
    tmp.replace(path)
    return path


def load(inventory: Inventory, node: str) -> dict[str, Any] | None:
    path = snapshot_path(inventory, node)
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if doc.get("schema") == SCHEMA else None


@dataclass(frozen=True)
class Change:
    key: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class NodeDrift:
    node: str
    baseline: str | None  # when the snapshot was taken; None: there is none
    changes: list[Change]
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "baseline": self.baseline,
            "error": self.error,
            "changes": [{"what": c.key, "before": c.before, "after": c.after} for c in self.changes],
        }


def diff(before: dict[str, str], after: dict[str, str]) -> list[Change]:
    keys = sorted(set(before) | set(after))
    return [Change(k, before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)]


def _containers_by_node(containers: list[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for node, ctid in containers:
        out.setdefault(node, []).append(ctid)
    return out


def check_all(inventory: Inventory, nodes: list[str], containers: list[tuple[str, int]]) -> list[NodeDrift]:
    from gpuhost.acceptance.connections import node_connection
    from gpuhost.errors import GpuhostError

    cts = _containers_by_node(containers)
    out = []
    for node in nodes:
        old = load(inventory, node)
        try:
            now = take(node_connection(node), cts.get(node, []))
        except GpuhostError as exc:
            out.append(NodeDrift(node, old["taken"] if old else None, [], error=str(exc)))
            continue
        if old is None:
            out.append(NodeDrift(node, None, []))
        else:
            out.append(NodeDrift(node, old["taken"], diff(old["values"], now)))
    return out


def save_all(inventory: Inventory, nodes: list[str], containers: list[tuple[str, int]]) -> None:
    from gpuhost.acceptance.connections import node_connection

    cts = _containers_by_node(containers)
    for node in nodes:
        save(inventory, node, take(node_connection(node), cts.get(node, [])))


def _short(text: str | None) -> str:
    if text is None:
        return "(absent)"
    one = " ".join(text.split())
    return one if len(one) <= 160 else one[:157] + "…"


def render(report: list[NodeDrift]) -> list[str]:
    lines = []
    for d in report:
        if d.error:
            lines.append(f"{d.node}: not read: {d.error}")
        elif d.baseline is None:
            lines.append(f"{d.node}: no snapshot yet (gpuhost provision records one after a successful run)")
        elif not d.changes:
            lines.append(f"{d.node}: nothing changed since {d.baseline}")
        else:
            lines.append(f"{d.node}: {len(d.changes)} changed since {d.baseline}")
            for c in d.changes:
                lines.append(f"  {c.key}: {_short(c.before)} -> {_short(c.after)}")
    return lines
