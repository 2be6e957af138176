"""``ssh.persist``: a node's SSH connection kept open between runs by this user's keeper, against a real sshd.

What an operator sees: the next converged run reads the node over the kept connection (one round trip, no SSH
handshake of its own: paramiko is never imported), a change made on the node in between is still seen and
fixed, a kept connection that died (the node restarted, the keeper was killed) costs nothing but the time of
the run's own connection, and the keeper goes away once the node has not been read for ``persist`` seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import write_inventory
from tests.support.kept import wait_kept

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "playbooks" / "example.yml"


class Operator:
    """Runs gpuhost as one user would: its own runtime folder (the keeper's socket) and cache (the records)."""

    def __init__(self, base: Path, host, persist: float | None, ssh: str = "") -> None:
        """``persist``: the inventory's ``ssh.persist`` (None: not written, the default)."""
        self.host = host
        self.run_dir = base / "run"
        self.cache = base / "cache"
        self.inventory = write_inventory(base / "inventory.yml", [host])
        if persist is not None:
            text = self.inventory.read_text().replace("    ssh:\n", f"    ssh:\n      persist: {persist}\n{ssh}")
            self.inventory.write_text(text)
        self.env = {**os.environ, "XDG_RUNTIME_DIR": str(self.run_dir), "XDG_CACHE_HOME": str(self.cache)}

    @property
    def folder(self) -> Path:
        return self.run_dir / "gpuhost"

    def run(self, *, imports: bool = False) -> tuple[dict, str]:
        r = self.attempt(imports=imports)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        return json.loads(r.stdout), r.stderr

    def attempt(self, *, imports: bool = False) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "COLUMNS": "200", **({"PYTHONPROFILEIMPORTTIME": "1"} if imports else {})}
        return subprocess.run(
            [sys.executable, "-m", "gpuhost", "run", str(EXAMPLE), "-i", str(self.inventory), "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    def ssh(self, command: str) -> str:
        h = self.host
        return subprocess.run(
            ["ssh", "-i", str(h.client_key), "-o", f"UserKnownHostsFile={h.known_hosts}", "-o", "BatchMode=yes"]
            + [f"root@{h.address}", command],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def prepare(self) -> None:
        """/etc/modprobe.d as a PVE host has it, and an update-initramfs that does nothing (the handler's)."""
        self.ssh(
            "mkdir -p /etc/modprobe.d && printf '#!/bin/sh\\n' > /usr/local/sbin/update-initramfs"
            " && chmod 755 /usr/local/sbin/update-initramfs"
        )

    def keeper_pid(self) -> int | None:
        try:
            return int((self.folder / "persist.pid").read_text())
        except (OSError, ValueError):
            return None

    def wait_kept(self) -> None:
        wait_kept(self.inventory, self.host.name, self.env)

    def stop_keeper(self) -> None:
        pid = self.keeper_pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def operator(sshd_host, tmp_path) -> Iterator[Operator]:
    op = Operator(tmp_path, sshd_host, persist=60)
    op.prepare()
    yield op
    op.stop_keeper()


def imported_paramiko(stderr: str) -> bool:
    return any(line.rsplit("|", 1)[-1].strip() == "paramiko" for line in stderr.splitlines())


def test_the_next_converged_run_reads_over_the_kept_connection(operator):
    first, _ = operator.run()
    assert sum(h["changed"] for h in first["hosts"].values()) > 0
    operator.run()  # converged: records its reads, and the keeper is asked to hold the node
    operator.wait_kept()
    report, imports = operator.run(imports=True)
    node = report["hosts"][operator.host.name]
    assert (node["changed"], node["failed"], node["round_trips"]) == (0, 0, 1)
    assert not imported_paramiko(imports), "the run opened an SSH connection of its own"
    assert (operator.folder.stat().st_mode & 0o777, (operator.folder / "persist.sock").stat().st_mode & 0o777) == (
        0o700,
        0o600,
    )


def test_a_change_made_between_runs_is_seen_over_the_kept_connection(operator):
    operator.run()
    operator.run()
    operator.wait_kept()
    assert "vfio" in operator.ssh("cat /etc/modules")
    operator.ssh("printf '# emptied by hand\\n' > /etc/modules")
    report, _ = operator.run()
    assert report["hosts"][operator.host.name]["changed"] >= 1
    assert "vfio" in operator.ssh("cat /etc/modules")


def test_a_kept_connection_that_died_costs_only_the_runs_own(operator):
    operator.run()
    operator.run()
    operator.wait_kept()
    operator.host.stop()  # the node goes away and comes back: the kept connection is gone
    operator.host.start()
    report, imports = operator.run(imports=True)
    node = report["hosts"][operator.host.name]
    assert (node["changed"], node["failed"]) == (0, 0)
    assert imported_paramiko(imports)  # read over the run's own connection
    operator.wait_kept()  # and the keeper holds a new one for the next run
    operator.stop_keeper()  # killed: its socket is left behind
    assert (operator.folder / "persist.sock").exists()
    report, _ = operator.run()
    assert report["hosts"][operator.host.name]["failed"] == 0
    operator.wait_kept()


def test_the_keeper_leaves_once_the_node_is_idle_for_persist_seconds(sshd_host, tmp_path):
    op = Operator(tmp_path, sshd_host, persist=1)
    op.prepare()
    try:
        op.run()
        deadline = time.monotonic() + 10
        while op.keeper_pid() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = op.keeper_pid()
        assert pid is not None, "no keeper was started"
        deadline = time.monotonic() + 15
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(f"/proc/{pid}").exists(), "the keeper still runs 15 s after its last read"
        assert not (op.folder / "persist.sock").exists()
    finally:
        op.stop_keeper()


def test_persist_0_starts_no_keeper(sshd_host, tmp_path):
    op = Operator(tmp_path, sshd_host, persist=0)
    op.prepare()
    op.run()
    op.run()
    assert not op.folder.exists()


def test_an_inventory_that_says_nothing_keeps_the_connection_as_ansible_does(sshd_host, tmp_path):
    op = Operator(tmp_path, sshd_host, persist=None)
    assert "persist" not in op.inventory.read_text()
    op.prepare()
    try:
        op.run()
        op.run()
        op.wait_kept()
        report, imports = op.run(imports=True)
        assert report["hosts"][sshd_host.name]["round_trips"] == 1
        assert not imported_paramiko(imports), "the run opened an SSH connection of its own"
    finally:
        op.stop_keeper()


def test_a_kept_connection_to_a_node_that_froze_is_given_up_in_seconds(sshd_host, tmp_path):
    # the watchdog would take keepalive x keepalive_count = 30 s to call the node gone; the keeper asks an idle
    # connection for a keepalive first and gives it connect_timeout (2 s) to answer
    settings = "      keepalive: 1\n      keepalive_count: 30\n      connect_timeout: 2\n"
    op = Operator(tmp_path, sshd_host, persist=60, ssh=settings)
    op.prepare()
    try:
        op.run()
        op.run()
        op.wait_kept()
        time.sleep(1.5)  # idle for longer than keepalive
        op.host.freeze()
        start = time.monotonic()
        r = op.attempt()
        took = time.monotonic() - start
        report = json.loads(r.stdout)
        assert r.returncode != 0 and report["hosts"][op.host.name]["unreachable"], r.stdout[-2000:]
        assert took < 15, f"the run took {took:.1f} s to find the node gone"
    finally:
        op.host.thaw()
        op.stop_keeper()
