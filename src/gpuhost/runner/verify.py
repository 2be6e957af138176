"""What a provisioned node and its containers must show, from the inventory (the role variables,
validated as a run would validate them).

The acceptance suite (:mod:`gpuhost.acceptance.suite`, run by ``gpuhost verify host|lxc``) turns these
expectations and the facts it reads into the named checks of :mod:`gpuhost.checks`.
"""

from __future__ import annotations

import re
from typing import Any

from gpuhost.checks.host import HostExpectation
from gpuhost.facts.host import HostFacts
from gpuhost.inventory.loader import Inventory
from gpuhost.inventory.models import ContainerSpec
from gpuhost.playbook.variables import Layer, Origin, merge, validate_role_vars
from gpuhost.roles.lxc_gpu import LxcGpuVars, gpu_devices
from gpuhost.roles.proxmox_host import ProxmoxHostVars, cmdline_tokens


def _vars(inventory: Inventory, node: str, model: type[Any], role: str, extra: dict[str, Any]) -> Any:
    doc, path = inventory.document, str(inventory.path)
    layers = [Layer.from_yaml(v, path, doc, loc) for v, loc in inventory.var_sources(node)]
    spec = inventory.nodes[node]
    layers.append(
        Layer(
            {"containers": {k: c.model_dump() for k, c in spec.containers.items()}},
            {"containers": Origin(path, doc, ("nodes", node, "containers"))},
        )
    )
    layers.append(Layer(extra, {k: Origin(f"--{k.removeprefix('lxc_')}") for k in extra}))
    return validate_role_vars(model, merge(layers), role=role, fallback=Origin(path, doc, ("nodes", node)))


def host_vars(inventory: Inventory, node: str) -> ProxmoxHostVars:
    result: ProxmoxHostVars = _vars(inventory, node, ProxmoxHostVars, "proxmox_host", {})
    return result


def lxc_vars(inventory: Inventory, node: str, ctids: list[int] | None = None) -> LxcGpuVars:
    result: LxcGpuVars = _vars(inventory, node, LxcGpuVars, "lxc_gpu", {"lxc_ctids": ctids} if ctids else {})
    return result


def host_expectation(facts: HostFacts, v: ProxmoxHostVars) -> HostExpectation:
    """What ``provision host`` leaves behind for this node's GPU path."""
    lxc = v.gpu_path == "lxc"
    return HostExpectation(
        cmdline=tuple(cmdline_tokens(facts.cpu_vendor, v)),
        nvidia_driver=v.nvidia_driver.version if lxc and v.nvidia_driver else None,
        nvidia_uvm=lxc,
        persistenced=lxc,
        vfio=v.gpu_path == "vm",
    )


def container_devices(spec: ContainerSpec, facts: HostFacts) -> list[str]:
    """The host device nodes ``provision lxc`` passes to this container."""
    return gpu_devices(spec, facts)


def gpu_count(devices: list[str]) -> int:
    return sum(1 for d in devices if re.fullmatch(r"/dev/nvidia\d+", d))
