"""Container proofs: each GPU container of the inventory, through ``pct exec`` on its node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpuhost.acceptance.plugin import reachable
from gpuhost.checks import container as checks
from gpuhost.checks.container import APT_HOLD_FILE
from gpuhost.facts.container import ContainerFacts, container_facts
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.facts.pve import ct_config, ct_status
from gpuhost.pve.config import GuestConfig
from gpuhost.runner.connect import read_fact
from gpuhost.runner.verify import container_devices, gpu_count, lxc_vars


@dataclass(frozen=True)
class CtProof:
    node: str
    ctid: int
    subject: str
    status: str | None
    config: GuestConfig | None
    host: HostFacts
    devices: list[str]  # host device nodes the container must get

    @property
    def module(self) -> str | None:
        return self.host.nvidia.version if self.host.nvidia else None


@pytest.fixture(scope="module")
def ct(gpuhost_inventory: Any, gpuhost_ct: tuple[str, int]) -> CtProof:
    from gpuhost.acceptance.backend import node_connection

    node, ctid = gpuhost_ct
    spec = lxc_vars(gpuhost_inventory, node, [ctid]).selected()[ctid]

    def read() -> CtProof:
        conn = node_connection(node)
        facts = read_fact(conn, host_facts)
        return CtProof(
            node,
            ctid,
            f"{node}/CT {ctid}",
            read_fact(conn, ct_status, ctid),
            read_fact(conn, ct_config, ctid),
            facts,
            container_devices(spec, facts),
        )

    return reachable(read)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def inside(ct: CtProof) -> ContainerFacts:
    from gpuhost.acceptance.backend import node_connection
    from gpuhost.connection.pct import PctConnection

    if ct.status != "running":
        pytest.fail(f"ct.running {ct.subject}: CT {ct.ctid} is {ct.status or 'absent'}", pytrace=False)
    return reachable(lambda: read_fact(PctConnection(node_connection(ct.node), ct.ctid), container_facts))  # type: ignore[no-any-return]


def test_running(ct: CtProof, prove: Any) -> None:
    prove(checks.running, ct.status, ct.subject, ct.ctid)


def test_devices_configured(ct: CtProof, prove: Any) -> None:
    prove(checks.devices_configured, ct.config, ct.subject, ct.ctid, ct.devices)


def test_device_nodes(ct: CtProof, inside: ContainerFacts, ct_host: Any, prove: Any) -> None:
    present = {d for d in ct.devices if ct_host.run("test -c %s", d).rc == 0}
    prove(checks.device_nodes, present, ct.subject, ct.devices)


def test_gpus_listed(ct: CtProof, inside: ContainerFacts, prove: Any) -> None:
    prove(checks.gpus_listed, inside, ct.subject, gpu_count(ct.devices))


def test_driver_match(ct: CtProof, inside: ContainerFacts, prove: Any) -> None:
    if ct.module is None:
        pytest.fail(f"ct.driver_match {ct.subject}: no NVIDIA kernel module is loaded on {ct.node}", pytrace=False)
    prove(checks.driver_match, inside, ct.subject, ct.module)


def test_driver_held(ct: CtProof, inside: ContainerFacts, ct_host: Any, prove: Any) -> None:
    pref = ct_host.file(APT_HOLD_FILE)
    prove(checks.driver_held, pref.content_string if pref.exists else None, ct.subject)


def test_uvm(ct: CtProof, inside: ContainerFacts, prove: Any) -> None:
    prove(checks.uvm, inside, ct.subject)


def test_memlock(ct: CtProof, inside: ContainerFacts, prove: Any) -> None:
    prove(checks.memlock, inside, ct.subject)


def test_cuda_init(ct: CtProof, inside: ContainerFacts, prove: Any) -> None:
    prove(checks.cuda_init, inside, ct.subject)
