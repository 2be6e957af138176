"""Host proofs: the node booted as provisioned (IOMMU, driver, device nodes, persistence, VM binding).

One proof per entry of the host check registry (:data:`gpuhost.checks.table.HOST_CHECKS`), against the
expectation the ``proxmox_host`` role builds (:func:`gpuhost.roles.proxmox_host.host_expectation`): the same
checks, under the same conditions, as the ``verify`` task at the end of ``provision host``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuhost.acceptance.expect import host_vars
from gpuhost.acceptance.proof import Proof, ProofSkipped, Prover, Subject, Suite, reachable
from gpuhost.checks.host import HostExpectation
from gpuhost.checks.table import HOST_CHECKS, HostCheck
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.roles.proxmox_host import host_expectation
from gpuhost.runner.connect import read_fact


@dataclass(frozen=True)
class NodeProof:
    name: str
    facts: HostFacts
    expect: HostExpectation
    gpu_path: str


def read_node(s: Subject) -> NodeProof:
    from gpuhost.acceptance.connections import node_connection

    name: str = s.key
    v = host_vars(s.inventory, name)
    facts: HostFacts = reachable(lambda: read_fact(node_connection(name), host_facts))
    return NodeProof(name, facts, host_expectation(facts.cpu_vendor, v), v.gpu_path)


def _host(entry: HostCheck) -> Callable[[Subject, Prover], None]:
    def run(s: Subject, prove: Prover) -> None:
        node = s.read(read_node)
        prove.label(entry.name, node.name)
        if not entry.applies(node.expect):
            raise ProofSkipped(f"gpu_path is {node.gpu_path}: {entry.wanted} is not expected")
        prove(entry.run, node.facts, node.name, node.expect, not_applicable=entry.not_applicable)

    return run


SUITE = Suite(
    "host", "test_host.py", "nodes", tuple(Proof("host", _host(e), (read_node,), e.name) for e in HOST_CHECKS)
)
