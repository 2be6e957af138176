"""What a provisioned node and its containers must show, from the inventory (the role variables,
validated as a run would validate them).

The acceptance suite (:mod:`gpuhost.acceptance.suite`, run by ``gpuhost verify host|lxc``) turns these
expectations and the facts it reads into the named checks of :mod:`gpuhost.checks`; the expectation itself
is built by the role that provisions it (:func:`gpuhost.roles.proxmox_host.host_expectation`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuhost.errors import ConfigError
from gpuhost.inventory.loader import Inventory, load_inventory
from gpuhost.playbook.variables import Layer, Origin, merge, validate_role_vars
from gpuhost.roles.lxc_gpu import LxcGpuVars

if TYPE_CHECKING:
    from gpuhost.roles.proxmox_host import ProxmoxHostVars


def _vars(inventory: Inventory, node: str, model: type[Any], role: str, extra: dict[str, tuple[Any, str]]) -> Any:
    """The role's variables for ``node``; ``extra`` maps a variable to its value and the flag that set it."""
    doc, path = inventory.document, str(inventory.path)
    layers = [Layer.from_yaml(v, path, doc, loc) for v, loc in inventory.var_sources(node)]
    spec = inventory.nodes[node]
    layers.append(
        Layer(
            {"containers": dict(spec.containers)},
            {"containers": Origin(path, doc, ("nodes", node, "containers"))},
        )
    )
    layers.append(Layer({k: v for k, (v, _) in extra.items()}, {k: Origin(flag) for k, (_, flag) in extra.items()}))
    return validate_role_vars(model, merge(layers), role=role, fallback=Origin(path, doc, ("nodes", node)))


def host_vars(inventory: Inventory, node: str) -> ProxmoxHostVars:
    from gpuhost.roles.proxmox_host import ProxmoxHostVars  # its operations are not needed for verify lxc or serve

    result: ProxmoxHostVars = _vars(inventory, node, ProxmoxHostVars, "proxmox_host", {})
    return result


def lxc_vars(inventory: Inventory, node: str, ctids: list[int] | None = None) -> LxcGpuVars:
    extra = {"lxc_ctids": (ctids, "--ctid")} if ctids else {}
    result: LxcGpuVars = _vars(inventory, node, LxcGpuVars, "lxc_gpu", extra)
    return result


def check_inputs(inventory: Path, kind: str, limit: str | None, ctids: list[int], vmids: list[int]) -> None:
    """Every expectation is validated before any node is contacted (bad input: exit 2)."""
    inv = load_inventory(inventory)
    names = inv.select(limit) if limit else list(inv.nodes)
    if kind == "host":
        for name in names:
            host_vars(inv, name)
        return
    if kind == "vm":
        vms = [v for n in names for v in inv.nodes[n].vms if not vmids or v in vmids]
        if not vms:
            which = f"--vmid {', '.join(map(str, vmids))}: no such VM" if vmids else "no VM (nodes.NAME.vms)"
            raise ConfigError(f"{which} in the inventory")
        return
    if kind == "serve":
        from gpuhost.serve.service import targets

        targets(inv, limit=limit, ctids=ctids or None)
        return
    plans = [lxc_vars(inv, name, ctids or None) for name in names]
    if ctids and not any(p.selected() for p in plans):
        raise ConfigError(f"--ctid {', '.join(map(str, ctids))}: no such container in the inventory")
