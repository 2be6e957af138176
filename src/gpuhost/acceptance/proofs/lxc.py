"""Container proofs: each GPU container of the inventory, through ``pct exec`` on its node."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from gpuhost.acceptance.expect import lxc_vars
from gpuhost.acceptance.proof import Proof, ProofFailed, Prover, Subject, Suite, reachable
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


def read_ct(s: Subject) -> CtProof:
    """One round trip: the node's facts, the CT's status and config."""
    from gpuhost.acceptance.connections import node_connection

    node, ctid = s.key
    spec = lxc_vars(s.inventory, node, [ctid]).selected()[ctid]

    def read() -> CtProof:
        facts, status, config = read_facts(node_connection(node), (host_facts,), (ct_status, ctid), (ct_config, ctid))
        return CtProof(node, ctid, f"{node}/CT {ctid}", status, config, facts, gpu_devices(spec, facts))

    return reachable(read)


@dataclass(frozen=True)
class Inside:
    """What the container's proofs read inside it, in one round trip."""

    facts: ContainerFacts
    present: set[str]  # those of the CT's device nodes that are character devices inside
    hold: str | None  # the APT hold file's content (None: absent)


def read_inside(s: Subject) -> Inside:
    from gpuhost.acceptance.connections import node_connection
    from gpuhost.connection.pct import PctConnection

    ct = s.read(read_ct)
    if ct.status != "running":
        raise ProofFailed(f"ct.running {ct.subject}: CT {ct.ctid} is {ct.status or 'absent'}")

    def read() -> Inside:
        conn = PctConnection(node_connection(ct.node), ct.ctid)
        tests = [f"test -c {shlex.quote(d)}" for d in ct.devices]
        reads = [container_facts.command(), files.content.command(APT_HOLD_FILE), *tests]
        facts, hold, *found = read_batch(conn, reads)
        present = {d for d, r in zip(ct.devices, found, strict=True) if r.exit_code == 0}
        return Inside(container_facts.parse(facts), present, files.content.parse(hold, APT_HOLD_FILE))

    return reachable(read)


def _running(s: Subject, prove: Prover) -> None:
    ct = s.read(read_ct)
    prove(checks.running, ct.status, ct.subject, ct.ctid)


def _devices_configured(s: Subject, prove: Prover) -> None:
    ct = s.read(read_ct)
    prove(checks.devices_configured, ct.config, ct.subject, ct.ctid, ct.devices)


def _device_nodes(s: Subject, prove: Prover) -> None:
    ct = s.read(read_ct)
    prove(checks.device_nodes, s.read(read_inside).present, ct.subject, ct.devices)


def _driver_held(s: Subject, prove: Prover) -> None:
    prove(checks.driver_held, s.read(read_inside).hold, s.read(read_ct).subject)


def _container(entry: ContainerCheck) -> Callable[[Subject, Prover], None]:
    """The checks over the container's own facts, as the ``verify`` task of ``provision lxc`` runs them."""

    def run(s: Subject, prove: Prover) -> None:
        ct, inside = s.read(read_ct), s.read(read_inside).facts
        prove.label(entry.name, ct.subject)
        expect = container_expectation(ct.devices, ct.module)
        if not entry.applies(expect):  # the suite always expects the driver: only the host's module can be missing
            raise ProofFailed(f"{entry.name} {ct.subject}: no NVIDIA kernel module is loaded on {ct.node}")
        prove(entry.run, inside, ct.subject, expect)

    return run


BOTH = (read_ct, read_inside)
SUITE = Suite(
    "lxc",
    "test_lxc.py",
    "containers",
    (
        Proof("running", _running, (read_ct,)),
        Proof("devices_configured", _devices_configured, (read_ct,)),
        Proof("device_nodes", _device_nodes, BOTH),
        Proof("driver_held", _driver_held, BOTH),
        *(Proof("container", _container(e), BOTH, e.name) for e in CONTAINER_CHECKS),
    ),
)
