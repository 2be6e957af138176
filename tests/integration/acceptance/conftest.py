"""A provisioned-lab fixture for the acceptance suite's own tests, on this process's reserved addresses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.lab_fixtures import LabHandle, lab_address, start_lab


@pytest.fixture(scope="module")
def make_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """``make_lab([(boot, cpu)], gpus=N)``: as the provisioning tests', but on 127.77.<this process's block>.19.*."""
    started: list[LabHandle] = []

    def make(nodes: list[tuple[str, str]], **extra: object) -> LabHandle:
        specs = [
            NodeSpec(f"pve{i + 1}", lab_address(19, i + 1), boot=boot, cpu=cpu, pve=8, **extra)
            for i, (boot, cpu) in enumerate(nodes)
        ]
        handle = start_lab(tmp_path_factory.mktemp("alab") / "state", specs)
        started.append(handle)
        return handle

    yield make
    for handle in started:
        handle.close()
        manager.down(handle.state_dir)
