"""VM proofs (q35, pcie=1, .0 functions, clique args, no kvm=off, vfio-pci bound), when gpuhost has them.

Pluggable: the proofs live in ``gpuhost.checks.vm`` (from ``gpuhost provision vm``), which provides
``vm_findings(node: Connection, subject: str, vmid: int) -> list[Finding]``. Guests come from the
inventory's ``nodes.NAME.vms``. Without VM guests the test skips saying so; with VM guests but without
the proofs it fails naming the missing capability.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from gpuhost.acceptance.plugin import reachable


def test_vm_proofs(gpuhost_vm: tuple[str, int], prove: Any) -> None:
    from gpuhost.acceptance.backend import node_connection

    try:
        vm = importlib.import_module("gpuhost.checks.vm")
    except ModuleNotFoundError:
        pytest.fail("VM proofs are not part of this gpuhost (gpuhost.checks.vm, from gpuhost provision vm)")
    node, vmid = gpuhost_vm
    findings = reachable(lambda: vm.vm_findings(node_connection(node), f"{node}/VM {vmid}", vmid))
    prove(list(findings))
