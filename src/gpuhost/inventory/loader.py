"""Load ``inventory/*.yml`` into an :class:`Inventory`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuhost import yamlfile
from gpuhost.errors import InventoryError
from gpuhost.inventory.models import GroupSpec, InventoryFile, NodeSpec

_SERVE_PATH_FIELDS = ("api_key_file", "hf_token_file")
_PATH_FIELDS = {"ssh": ("key_file", "known_hosts_file", "password_file"), "api": ("token_secret_file", "ca_file")}


@dataclass(frozen=True)
class Inventory:
    path: Path
    nodes: dict[str, NodeSpec]
    groups: dict[str, GroupSpec]
    vars: dict[str, Any] = field(default_factory=dict)
    #: the parsed document, for line numbers of values (see :meth:`origin`)
    document: Any = field(default=None, compare=False, repr=False)

    def select(self, pattern: str) -> list[str]:
        """Node names matched by ``pattern``: ``all``, a group, a node, or a comma list of these.

        Unknown names raise :class:`InventoryError`. Order follows the inventory.
        """
        wanted: set[str] = set()
        for part in (p.strip() for p in pattern.split(",")):
            if not part:
                continue
            if part == "all":
                wanted.update(self.nodes)
            elif part in self.groups:
                wanted.update(self.groups[part].nodes)
            elif part in self.nodes:
                wanted.add(part)
            else:
                raise InventoryError(f"'{part}' is neither a node nor a group of this inventory", file=str(self.path))
        return [n for n in self.nodes if n in wanted]

    def vars_for(self, node: str) -> dict[str, Any]:
        """Inventory vars, then each group's (in inventory order), then the node's own."""
        merged: dict[str, Any] = dict(self.vars)
        spec = self.nodes[node]
        for gname, group in self.groups.items():
            if gname in spec.groups:
                merged.update(group.vars)
        merged.update(spec.vars)
        return merged

    def var_sources(self, node: str) -> list[tuple[dict[str, Any], list[str | int]]]:
        """The node's variable layers, lowest precedence first, each with its path in the document."""
        spec = self.nodes[node]
        layers: list[tuple[dict[str, Any], list[str | int]]] = [(dict(self.vars), ["vars"])]
        for gname, group in self.groups.items():
            if gname in spec.groups:
                layers.append((dict(group.vars), ["groups", gname, "vars"]))
        layers.append((dict(spec.vars), ["nodes", node, "vars"]))
        return layers


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    nodes = raw.get("nodes")
    for node in nodes.values() if isinstance(nodes, dict) else ():
        if not isinstance(node, dict):
            continue
        vms = node.get("vms")
        guests = [v for v in vms.values() if isinstance(v, dict)] if isinstance(vms, dict) else []
        for entry in [node, *guests]:  # a VM's ssh section (its guest) resolves like the node's
            for section, keys in _PATH_FIELDS.items():
                sub = entry.get(section)
                if isinstance(sub, dict):
                    for key in keys:
                        value = sub.get(key)
                        if isinstance(value, str) and not value.startswith(("/", "~")):
                            sub[key] = str(base / value)
        containers = node.get("containers")
        for ct in containers.values() if isinstance(containers, dict) else ():
            serve = ct.get("serve") if isinstance(ct, dict) else None
            for key in _SERVE_PATH_FIELDS if isinstance(serve, dict) else ():
                value = serve.get(key)  # type: ignore[union-attr]
                if isinstance(value, str) and not value.startswith(("/", "~")):
                    serve[key] = str(base / value)  # type: ignore[index]


def load_inventory(path: str | Path) -> Inventory:
    """Parse and validate an inventory file; every error names the file, line and field."""
    path = Path(path)
    data = yamlfile.load(path, InventoryError)
    if not isinstance(data, dict):
        raise InventoryError("the inventory must be a mapping with a 'nodes' key", file=str(path), line=1)
    raw = yamlfile.plain(data)
    _resolve_paths(raw, path.resolve().parent)
    try:
        doc = InventoryFile.model_validate(raw)
    except ValidationError as exc:
        yamlfile.raise_validation(exc, data, path, InventoryError)
        raise  # unreachable
    for gname, group in doc.groups.items():
        for i, member in enumerate(group.nodes):
            if member not in doc.nodes:
                raise InventoryError(
                    f"unknown node '{member}'",
                    file=str(path),
                    line=yamlfile.line_of(data, ["groups", gname, "nodes", i]),
                    field=f"groups.{gname}.nodes",
                )
    nodes = {
        name: spec.model_copy(update={"name": name, "groups": _groups_of(name, doc.groups.items())})
        for name, spec in doc.nodes.items()
    }
    return Inventory(path=path, nodes=nodes, groups=dict(doc.groups), vars=dict(doc.vars), document=data)


def _groups_of(node: str, groups: Iterable[tuple[str, GroupSpec]]) -> tuple[str, ...]:
    return tuple(g for g, spec in groups if node in spec.nodes)
