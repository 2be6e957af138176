"""SIGKILL of gpuhost at two more points, then a re-run (issue 31, "Orphans": a killed ``pct push`` left its
full-size temp file in the CT; a killed run's ``install.sh`` was still installing into the venv when the re-run
started its own). Each point: killed while the node shows it, re-run at once, converged, nothing lost.

One serving node of the launch tests (host driver, CT 230 with both GPUs and the driver's userspace), shared by
both points.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.conftest import gpuhost_env
from tests.integration.lab.test_launch_sglang import CT, serving_lab
from tests.lab_fixtures import LabHandle, lab_address

pytestmark = [pytest.mark.faults, pytest.mark.integration]

NODE = "sgl"
BIG = "/root/big.bin"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    yield from serving_lab(tmp_path_factory.mktemp("killpv") / "state", lab_address(19, 1))


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuhost", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gpuhost_env(),
    )


def kill_when_seen(lab: LabHandle, proc: subprocess.Popen[str], pattern: str, within: float = 240) -> bool:
    """SIGKILL ``proc`` once ``pgrep -f pattern`` finds a process on the node (the CT's are among them)."""
    deadline = time.monotonic() + within
    while proc.poll() is None and time.monotonic() < deadline:
        if lab.run(NODE, f"pgrep -f {shlex.quote(pattern)} >/dev/null", timeout=10).rc == 0:
            proc.kill()
            proc.communicate(timeout=30)
            return True
        time.sleep(0.05)
    return False


def finish(proc: subprocess.Popen[str]) -> tuple[int, dict]:
    out, err = proc.communicate(timeout=900)
    assert out.startswith("{"), out + err
    return proc.returncode, json.loads(out)


def in_ct(lab: LabHandle, command: str) -> str:
    return lab.run(NODE, f"pct exec {CT} -- sh -c {shlex.quote(command)}", timeout=60).stdout


def test_a_killed_pct_push_leaves_no_temp_after_the_rerun(lab: LabHandle, tmp_path: Path) -> None:
    # 256 MiB: pct push takes long enough to be caught running
    sha = lab.run(NODE, f"head -c 268435456 /dev/urandom > {BIG} && sha256sum {BIG}", timeout=120).stdout.split()[0]
    book = tmp_path / "push.yml"
    book.write_text(
        "- hosts: all\n  tasks:\n    - name: big file pushed\n"
        f"      push_to_guest: {{ctid: {CT}, src: {BIG}, dest: {BIG}, sha256: {sha}}}\n"
    )
    inventory = str(lab.state_dir / "launch.yml")
    first = start("run", str(book), "-i", inventory)
    assert kill_when_seen(lab, first, f"[p]ct push {CT} {BIG}"), "the run ended before pct push ran"
    temps = in_ct(lab, "ls -a /root | grep '^.big.bin.gpuhost-' || true").split()
    assert in_ct(lab, f"test -e {BIG} && echo there || echo absent").strip() == "absent"
    assert temps, "the kill landed before the push had its temp"  # what the killed push leaves behind
    code, report = finish(start("run", str(book), "-i", inventory, "--lock-wait", "60"))
    assert code == 0, [t.get("error") for t in report["tasks"] if t["status"] == "failed"]
    assert in_ct(lab, f"sha256sum {BIG}").split()[0] == sha
    assert in_ct(lab, "ls -a /root | grep '^.big.bin.gpuhost-' || true").split() == []
    lab.run(NODE, f"rm -f {BIG}; pct exec {CT} -- rm -f {BIG}")


def test_a_killed_venv_install_is_finished_by_the_rerun_alone(lab: LabHandle) -> None:
    inventory = str(lab.state_dir / "launch.yml")
    first = start("launch", "sglang", "-i", inventory)
    assert kill_when_seen(lab, first, "[p]ip install -q"), "the launch ended before the venv install"
    # the re-run starts at once: the killed run's install must not run beside it (it is stopped before the
    # node's run lock is let go; the re-run waits for the lock)
    code, report = finish(start("launch", "sglang", "-i", inventory, "--lock-wait", "60"))
    assert code == 0, [t.get("error") for t in report["tasks"] if t["status"] == "failed"]
    venv = [t for t in report["tasks"] if "venv with" in t["task"]]
    assert venv and venv[0]["status"] in ("changed", "ok"), venv
    install = "/opt/gpuhost/sglang/lab-glm5-tp2/install.sh"
    assert lab.run(NODE, f"pct exec {CT} -- sh {install} verify").rc == 0
    assert lab.run(NODE, "pgrep -f '[p]ip install -q'").rc == 1  # nothing of either run still installing
    code, again = finish(start("launch", "sglang", "-i", inventory))
    assert code == 0 and sum(h["changed"] for h in again["hosts"].values()) == 0, again["tasks"]
