"""Host proofs: the node booted as provisioned (IOMMU, driver, device nodes, persistence, VM binding).

One test per entry of the host check registry (:data:`gpuhost.checks.table.HOST_CHECKS`), against the
expectation the ``proxmox_host`` role builds (:func:`gpuhost.roles.proxmox_host.host_expectation`): the same
checks, under the same conditions, as the ``verify`` task at the end of ``provision host``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpuhost.acceptance.expect import host_vars
from gpuhost.acceptance.plugin import reachable
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


@pytest.fixture(scope="module")
def node(gpuhost_inventory: Any, gpuhost_node: str) -> NodeProof:
    from gpuhost.acceptance.backend import node_connection

    v = host_vars(gpuhost_inventory, gpuhost_node)
    facts: HostFacts = reachable(lambda: read_fact(node_connection(gpuhost_node), host_facts))
    return NodeProof(gpuhost_node, facts, host_expectation(facts.cpu_vendor, v), v.gpu_path)


@pytest.mark.parametrize("entry", HOST_CHECKS, ids=[c.name for c in HOST_CHECKS])
def test_host(node: NodeProof, entry: HostCheck, prove: Any, request: pytest.FixtureRequest) -> None:
    request.node.user_properties += [("check", entry.name), ("subject", node.name)]
    if not entry.applies(node.expect):
        pytest.skip(f"gpu_path is {node.gpu_path}: {entry.wanted} is not expected")
    prove(entry.run, node.facts, node.name, node.expect, not_applicable=entry.not_applicable)
