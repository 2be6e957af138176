"""Error texts at the edges: a mis-configuration names where the operator fixes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def gpuhost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, cwd=REPO, timeout=60, check=False
    )


def test_a_role_variable_set_nowhere_points_at_the_inventory_not_gpuhosts_playbook(tmp_path: Path):
    inv = tmp_path / "inv.yml"
    inv.write_text("nodes:\n  pve1:\n    address: 127.0.0.1\n    ssh:\n      config_file: none\n")
    r = gpuhost("provision", "lxc", "-i", str(inv), "--check")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"error: {inv}:2: field 'nvidia_driver': gpu_path is lxc, so the host needs"), r.stderr
    assert "provision-lxc.yml" not in r.stderr
    assert "internal error" not in r.stderr


def test_a_role_variable_written_wrong_points_at_its_line(tmp_path: Path):
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    ssh:\n      config_file: none\n"
        "vars:\n  gpu_path: vm\n  uvm_disable_hmm: maybe\n"
    )
    r = gpuhost("provision", "host", "-i", str(inv), "--check")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"error: {inv}:8: field 'uvm_disable_hmm'" in r.stderr
