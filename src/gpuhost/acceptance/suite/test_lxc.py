"""Container proofs: each GPU container of the inventory, through ``pct exec`` on its node."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

import pytest

from gpuhost.acceptance.expect import lxc_vars
from gpuhost.acceptance.plugin import reachable
from gpuhost.checks import container as checks
from gpuhost.checks.container import APT_HOLD_FILE
from gpuhost.checks.table import CONTAINER_CHECKS, ContainerCheck
from gpuhost.facts import files
from gpuhost.facts.container import ContainerFacts, container_facts
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.facts.pve import ct_config, ct_status
from gpuhost.pve.config import GuestConfig
from gpuhost.roles.lxc_gpu import container_expectation, gpu_devices
from gpuhost.runner.batch_read import read_batch, read_facts


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

    def read() -> CtProof:  # one round trip: the node's facts, the CT's status and config
        facts, status, config = read_facts(node_connection(node), (host_facts,), (ct_status, ctid), (ct_config, ctid))
        return CtProof(node, ctid, f"{node}/CT {ctid}", status, config, facts, gpu_devices(spec, facts))

    return reachable(read)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Inside:
    """What the container's proofs read inside it, in one round trip."""

    facts: ContainerFacts
    present: set[str]  # those of the CT's device nodes that are character devices inside
    hold: str | None  # the APT hold file's content (None: absent)


@pytest.fixture(scope="module")
def inside_reads(ct: CtProof) -> Inside:
    from gpuhost.acceptance.backend import node_connection
    from gpuhost.connection.pct import PctConnection

    if ct.status != "running":
        pytest.fail(f"ct.running {ct.subject}: CT {ct.ctid} is {ct.status or 'absent'}", pytrace=False)

    def read() -> Inside:
        conn = PctConnection(node_connection(ct.node), ct.ctid)
        tests = [f"test -c {shlex.quote(d)}" for d in ct.devices]
        reads = [container_facts.command(), files.content.command(APT_HOLD_FILE), *tests]
        facts, hold, *found = read_batch(conn, reads)
        present = {d for d, r in zip(ct.devices, found, strict=True) if r.exit_code == 0}
        return Inside(container_facts.parse(facts), present, files.content.parse(hold, APT_HOLD_FILE))

    return reachable(read)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def inside(inside_reads: Inside) -> ContainerFacts:
    return inside_reads.facts


def test_running(ct: CtProof, prove: Any) -> None:
    prove(checks.running, ct.status, ct.subject, ct.ctid)


def test_devices_configured(ct: CtProof, prove: Any) -> None:
    prove(checks.devices_configured, ct.config, ct.subject, ct.ctid, ct.devices)


def test_device_nodes(ct: CtProof, inside_reads: Inside, prove: Any) -> None:
    prove(checks.device_nodes, inside_reads.present, ct.subject, ct.devices)


def test_driver_held(ct: CtProof, inside_reads: Inside, prove: Any) -> None:
    prove(checks.driver_held, inside_reads.hold, ct.subject)


@pytest.mark.parametrize("entry", CONTAINER_CHECKS, ids=[c.name for c in CONTAINER_CHECKS])
def test_container(
    ct: CtProof, inside: ContainerFacts, entry: ContainerCheck, prove: Any, request: pytest.FixtureRequest
) -> None:
    """The checks over the container's own facts, as the ``verify`` task of ``provision lxc`` runs them."""
    request.node.user_properties += [("check", entry.name), ("subject", ct.subject)]
    expect = container_expectation(ct.devices, ct.module)
    if not entry.applies(expect):  # the suite always expects the driver: only the host's module can be missing
        pytest.fail(f"{entry.name} {ct.subject}: no NVIDIA kernel module is loaded on {ct.node}", pytrace=False)
    prove(entry.run, inside, ct.subject, expect)
