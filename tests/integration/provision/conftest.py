"""A lab of simulated PVE nodes for the provisioning tests (this process's block of 127.81.0.0/16, apart from the lab's own tests).

Each test module gets fresh nodes: provisioning edits boot files and reboots nodes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.lab_fixtures import LabHandle, reserved_address, start_lab

_COUNTER = iter(range(20))


def gpuhost(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=timeout,
    )


def run_json(*args: str) -> tuple[int, dict]:
    r = gpuhost(*args, "--json")
    assert r.stdout.startswith("{"), r.stdout + r.stderr
    return r.returncode, json.loads(r.stdout)


@pytest.fixture(scope="module")
def make_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """``make_lab(nodes=[(boot, cpu), …], gpus=0)`` starts nodes; all are stopped after the module."""
    started: list[LabHandle] = []

    def make(nodes: list[tuple[str, str]], **extra: object) -> LabHandle:
        n = next(_COUNTER)
        specs = [
            NodeSpec(f"pve{i + 1}", reserved_address(81, n, i + 1), boot=boot, cpu=cpu, pve=8, **extra)
            for i, (boot, cpu) in enumerate(nodes)
        ]
        state = tmp_path_factory.mktemp("plab") / "state"
        handle = start_lab(state, specs)
        started.append(handle)
        return handle

    yield make
    for handle in started:
        handle.close()
        manager.down(handle.state_dir)


def task(report: dict, host: str, name_part: str) -> dict:
    matches = [t for t in report["tasks"] if t["host"] == host and name_part in t["task"]]
    assert matches, f"no task '{name_part}' for {host}: {[t['task'] for t in report['tasks']]}"
    return matches[-1]
