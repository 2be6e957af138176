"""lab up/status/down: fast start, nothing left behind, nodes die with their owner, root required."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.lab_fixtures import lab_address, require_lab_prerequisites


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from gpuhost.cli.app import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def _ns_inodes(pids: list[int]) -> set[str]:
    out = set()
    for pid in pids:
        for ns in ("mnt", "pid", "uts"):
            try:
                out.add(os.readlink(f"/proc/{pid}/ns/{ns}"))
            except OSError:
                pass
    return out


def _start_ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _older_processes_in(namespaces: set[str], before_ticks: int) -> list[int]:
    """Processes that started before ``before_ticks`` and still live in one of ``namespaces``
    (a namespace number may be reused by a namespace created later: those do not count)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if _ns_inodes([int(entry)]) & namespaces and _start_ticks(int(entry)) <= before_ticks:
                    found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def _mounts_under(path: Path) -> list[str]:
    hits = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                info = Path(f"/proc/{entry}/mountinfo").read_text()
            except OSError:
                continue
            hits += [line for line in info.splitlines() if str(path) in line]
    return hits


def test_ten_nodes_start_and_down_leaves_nothing(tmp_path: Path) -> None:
    require_lab_prerequisites()
    state = tmp_path / "ten"
    started = time.monotonic()
    r = _cli("lab", "up", "--nodes", "10", "--address", lab_address(10, 1), "--state-dir", str(state))
    elapsed = time.monotonic() - started
    try:
        _check_ten_nodes(state, r, elapsed)
    finally:
        if state.exists():  # a failed assertion must not leave ten nodes running
            _cli("lab", "down", "--state-dir", str(state))


def _check_ten_nodes(state: Path, r: subprocess.CompletedProcess[str], elapsed: float) -> None:
    assert r.returncode == 0, r.stdout + r.stderr
    reported = float(re.search(r"lab up: 10 node\(s\) in ([0-9.]+) s", r.stdout).group(1))
    # how long it takes is a benchmark's business, not a test's (timings depend on the machine's load)
    print(f"lab up: 10 nodes ready in {reported:.2f} s (command {elapsed:.2f} s)")
    status = manager.status(state)
    assert [n["name"] for n in status.nodes] == [f"pve{i}" for i in range(1, 11)]
    assert all(n["running"] for n in status.nodes)
    init_pids = [int(n["init_pid"]) for n in status.nodes]
    namespaces = _ns_inodes(init_pids)
    assert len(namespaces) == 30  # mnt, pid and uts of each node
    assert _processes_mentioning(str(state))
    listed = _cli("lab", "status", "--state-dir", str(state))
    assert listed.returncode == 0 and listed.stdout.count(" running ") == 10
    as_json = json.loads(_cli("lab", "status", "--json", "--state-dir", str(state)).stdout)
    assert as_json["inventory"] == str(state / "inventory.yml") and len(as_json["nodes"]) == 10

    before_down = int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))
    r = _cli("lab", "down", "--state-dir", str(state))
    assert r.returncode == 0 and "stopped and removed" in r.stdout, r.stderr
    assert not state.exists()
    assert _processes_mentioning(str(state)) == []
    assert not any(Path(f"/proc/{pid}").exists() for pid in init_pids)
    assert _mounts_under(state) == []
    assert _older_processes_in(namespaces, before_down) == []


def test_nodes_die_with_the_supervisor(tmp_path: Path) -> None:
    require_lab_prerequisites()
    state = tmp_path / "orphan"
    manager.up([NodeSpec("pve1", lab_address(11, 1))], state)
    info = manager.status(state)
    init_pid = int(info.nodes[0]["init_pid"])
    assert info.supervisor_pid is not None
    os.kill(info.supervisor_pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{init_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not Path(f"/proc/{init_pid}").exists()
    assert manager.status(state).supervisor_pid is None
    assert manager.down(state) is True
    assert not state.exists() and _mounts_under(state) == []


def test_a_second_lab_in_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    require_lab_prerequisites()
    state = tmp_path / "once"
    manager.up([NodeSpec("pve1", lab_address(12, 1))], state)
    try:
        r = _cli("lab", "up", "--address", lab_address(12, 5), "--state-dir", str(state))
        assert r.returncode == 2 and "a lab is already running in" in r.stderr
    finally:
        manager.down(state)
    r = _cli("lab", "status", "--state-dir", str(state))
    assert r.returncode == 2 and "no lab in" in r.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    for args, message in (
        (["--boot", "lilo"], "--boot must be one of"),
        (["--pve", "7"], "--pve must be one of"),
        (["--address", "10.0.0.1"], "must use 127.0.0.0/8 addresses"),
    ):
        r = _cli("lab", "up", "--state-dir", str(tmp_path / "x"), *args)
        assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()


def test_lab_requires_root(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another user")
    code = "import sys; from gpuhost.cli.app import main; main(sys.argv[1:])"
    r = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-c",
            code,
            "lab",
            "up",
            "--address",
            lab_address(13, 1),
            "--state-dir",
            str(tmp_path / "nobody"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": "/tmp"},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "gpuhost lab needs root" in r.stderr


def test_cli_seed_directory_lands_in_every_node(tmp_path: Path) -> None:
    require_lab_prerequisites()
    seed = tmp_path / "seed"
    (seed / "etc/pve/lxc").mkdir(parents=True)
    (seed / "etc/pve/lxc/150.conf").write_text(
        "arch: amd64\nhostname: seeded\nmemory: 512\nostype: debian\n"
        "rootfs: local-lvm:vm-150-disk-0,size=4G\n"
        "lxc.prlimit.memlock: unlimited\n"
    )
    (seed / "etc/modprobe.d").mkdir(parents=True)
    (seed / "etc/modprobe.d/local.conf").write_text("options foo bar=1\n")
    state = tmp_path / "seeded"
    r = _cli(
        "lab", "up", "--nodes", "2", "--address", lab_address(14, 1), "--seed", str(seed), "--state-dir", str(state)
    )
    assert r.returncode == 0, r.stderr
    try:
        from tests.lab_fixtures import LabHandle

        nodes = [NodeSpec(f"pve{i}", lab_address(14, i)) for i in (1, 2)]
        handle = LabHandle(state.resolve(), nodes)
        for node in ("pve1", "pve2"):
            out = handle.run(node, "pct config 150; ls /etc/pve/nodes/*/lxc; cat /etc/modprobe.d/local.conf").stdout
            assert "hostname: seeded\n" in out and "lxc.prlimit.memlock: unlimited\n" in out
            assert "150.conf" in out and "options foo bar=1" in out
        handle.close()
    finally:
        _cli("lab", "down", "--state-dir", str(state))
