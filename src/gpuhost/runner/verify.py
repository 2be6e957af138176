"""``gpuhost verify host|lxc``: the same named checks the provision roles end with, run at any time.

Expectations come from the inventory (the role variables, validated as a run would), facts from
one round trip per node (and one per container).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuhost.checks.container import ContainerExpectation, container_findings
from gpuhost.checks.finding import Finding, Level, worst
from gpuhost.checks.host import HostExpectation, host_findings
from gpuhost.connection.base import Connection
from gpuhost.errors import ConfigError, GpuhostError
from gpuhost.facts.container import container_facts
from gpuhost.facts.host import host_facts
from gpuhost.facts.pve import ct_status
from gpuhost.inventory.loader import Inventory
from gpuhost.inventory.models import NodeSpec
from gpuhost.playbook.variables import Layer, Origin, merge, validate_role_vars
from gpuhost.roles.lxc_gpu import LxcGpuVars, gpu_devices
from gpuhost.roles.proxmox_host import ProxmoxHostVars, cmdline_tokens
from gpuhost.runner.connect import open_connection, read_fact

Kind = Literal["host", "lxc"]


@dataclass
class VerifyReport:
    kind: Kind
    findings: list[Finding] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if worst(self.findings) >= Level.FAIL else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "gpuhost.verify/1",
            "kind": self.kind,
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "findings": [f.to_json() for f in self.findings],
        }


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


def _host(conn: Connection, name: str, v: ProxmoxHostVars) -> list[Finding]:
    facts = read_fact(conn, host_facts)
    lxc = v.gpu_path == "lxc"
    expect = HostExpectation(
        cmdline=tuple(cmdline_tokens(facts.cpu_vendor, v)),
        nvidia_driver=v.nvidia_driver.version if lxc and v.nvidia_driver else None,
        nvidia_uvm=lxc,
        persistenced=lxc,
        vfio=v.gpu_path == "vm",
    )
    return host_findings(facts, name, expect)


def _containers(conn: Connection, name: str, v: LxcGpuVars) -> list[Finding]:
    from gpuhost.connection.pct import PctConnection

    facts = read_fact(conn, host_facts)
    module = facts.nvidia.version if facts.nvidia else None
    out: list[Finding] = []
    for ctid, spec in v.selected().items():
        subject = f"{name}/CT {ctid}"
        status = read_fact(conn, ct_status, ctid)
        if status != "running":
            out.append(
                Finding(
                    Level.FAIL, "ct.running", subject, f"CT {ctid} is {status or 'absent'}", fix="gpuhost provision lxc"
                )
            )
            continue
        gpus = sum(1 for d in gpu_devices(spec, facts) if re.fullmatch(r"/dev/nvidia\d+", d))
        cf = read_fact(PctConnection(conn, ctid), container_facts)
        out += container_findings(cf, subject, ContainerExpectation(gpus=gpus, driver=module))
    return out


def verify(
    inventory: Inventory,
    kind: Kind,
    *,
    limit: str | None = None,
    ctids: list[int] | None = None,
    forks: int = 10,
    connect: Callable[[NodeSpec], Connection] = open_connection,
) -> VerifyReport:
    """Findings for every selected node (``kind='host'``) or its containers (``kind='lxc'``)."""
    names = inventory.select(limit) if limit else list(inventory.nodes)
    plans: dict[str, Any] = {}
    for name in names:  # every expectation is checked before any host is contacted
        if kind == "host":
            plans[name] = _vars(inventory, name, ProxmoxHostVars, "proxmox_host", {})
        else:
            plans[name] = _vars(inventory, name, LxcGpuVars, "lxc_gpu", {"lxc_ctids": ctids} if ctids else {})
    if kind == "lxc" and ctids and not any(p.selected() for p in plans.values()):
        raise ConfigError(f"--ctid {', '.join(map(str, ctids))}: no such container in the inventory")

    def one(name: str) -> list[Finding]:
        try:
            with connect(inventory.nodes[name]) as conn:
                return _host(conn, name, plans[name]) if kind == "host" else _containers(conn, name, plans[name])
        except GpuhostError as exc:
            return [Finding(Level.FAIL, "reachable", name, str(exc))]

    report = VerifyReport(kind)
    with ThreadPoolExecutor(max_workers=max(1, forks)) as pool:
        for findings in pool.map(one, names):
            report.findings += findings
    return report
