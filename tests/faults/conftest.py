"""Fault-suite fixtures: fresh lab nodes on this process's reserved loopback block (tests.lab_fixtures),
and gpuhost run as a user runs it, in a subprocess that can be killed."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.lab_fixtures import LabHandle, lab_address, start_lab

SRC = str(Path(__file__).resolve().parents[2] / "src")
_SUBNETS = itertools.count(10)  # subnets 10-19 of the reserved block; tests.lab_fixtures' lab uses 0


def gpuhost_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpuhost", *args]


def gpuhost_env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": SRC}


def gpuhost(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(gpuhost_cmd(*args), capture_output=True, text=True, env=gpuhost_env(), timeout=timeout)


@pytest.fixture(scope="module")
def fresh_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LabHandle]]:
    """``fresh_lab(nodes=[(boot, cpu)], gpus=8)``: new nodes, stopped at the end of the module."""
    started: list[LabHandle] = []

    def make(nodes: list[tuple[str, str]] | None = None, **extra: object) -> LabHandle:
        subnet = next(_SUBNETS) % 20
        specs = [
            NodeSpec(f"pve{i + 1}", lab_address(subnet, i + 1), boot=boot, cpu=cpu, pve=8, **extra)  # type: ignore[arg-type]
            for i, (boot, cpu) in enumerate(nodes or [("systemd-boot", "amd")])
        ]
        handle = start_lab(tmp_path_factory.mktemp("flab") / "state", specs)
        started.append(handle)
        return handle

    yield make
    for handle in started:
        handle.close()
        manager.down(handle.state_dir)
