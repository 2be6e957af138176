"""Host proofs: the node booted as provisioned (IOMMU, driver, device nodes, persistence, VM binding)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpuhost.acceptance.plugin import reachable
from gpuhost.checks import host as checks
from gpuhost.checks.host import HostExpectation
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.runner.connect import read_fact
from gpuhost.runner.verify import host_expectation, host_vars


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
    facts = reachable(lambda: read_fact(node_connection(gpuhost_node), host_facts))
    return NodeProof(gpuhost_node, facts, host_expectation(facts, v), v.gpu_path)


def _only(node: NodeProof, wanted: bool, what: str) -> None:
    if not wanted:
        pytest.skip(f"gpu_path is {node.gpu_path}: {what} is not expected")


def test_cmdline_booted(node: NodeProof, prove: Any) -> None:
    prove(checks.cmdline_booted, node.facts, node.name, node.expect.cmdline)


def test_cmdline_configured(node: NodeProof, prove: Any) -> None:
    prove(checks.cmdline_configured, node.facts, node.name, node.expect.cmdline)


def test_iommu_passthrough(node: NodeProof, prove: Any) -> None:
    if "iommu=pt" not in node.expect.cmdline:
        pytest.skip("iommu=pt is not among the expected tokens")
    prove(checks.iommu_passthrough, node.facts, node.name, not_applicable="the kernel log names no IOMMU domain")


def test_iommu_groups(node: NodeProof, prove: Any) -> None:
    prove(checks.iommu_groups, node.facts, node.name, not_applicable="the node has no NVIDIA GPUs")


def test_nvidia_module(node: NodeProof, prove: Any) -> None:
    _only(node, node.expect.nvidia_driver is not None, "an NVIDIA kernel module on the host")
    prove(checks.nvidia_module, node.facts, node.name, node.expect.nvidia_driver)


def test_nvidia_uvm(node: NodeProof, prove: Any) -> None:
    _only(node, node.expect.nvidia_uvm, "/dev/nvidia-uvm on the host")
    prove(checks.nvidia_uvm, node.facts, node.name)


def test_persistenced(node: NodeProof, prove: Any) -> None:
    _only(node, node.expect.persistenced, "nvidia-persistenced")
    prove(checks.persistenced, node.facts, node.name)


def test_vfio_bound(node: NodeProof, prove: Any) -> None:
    _only(node, node.expect.vfio, "vfio-pci binding")
    prove(checks.vfio_bound, node.facts, node.name, not_applicable="the node has no NVIDIA GPUs")
