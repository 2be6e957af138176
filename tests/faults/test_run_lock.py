"""Two gpuhost runs at once against one lab node: the second waits for the first's per-node run lock, or
fails naming it; the node converges and the slow step and the handler each ran once, never interleaved."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.faults.conftest import gpuhost, gpuhost_cmd, gpuhost_env

pytestmark = [pytest.mark.faults, pytest.mark.integration]

DIR = "/root/lock-test"


def playbook(tmp_path: Path) -> Path:
    book = tmp_path / "slow.yml"
    book.write_text(
        f"""
- hosts: all
  tasks:
    - name: marker written
      copy: {{dest: {DIR}/marker, content: "converged\\n"}}
      notify: [log the handler]
    - name: slow step
      command:
        cmd: "echo start $$ >> {DIR}/log; sleep 6; echo end $$ >> {DIR}/log; touch {DIR}/done"
        creates: {DIR}/done
  handlers:
    - name: log the handler
      command: {{cmd: "echo handler >> {DIR}/log"}}
"""
    )
    return book


def start(lab, book: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gpuhost_cmd("run", str(book), "-i", str(lab.inventory), "--limit", "pve1", "--json", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gpuhost_env(),
    )


def report_of(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=120)
    assert out.startswith("{"), out + err
    return json.loads(out)


@pytest.fixture
def node(fresh_lab):
    lab = fresh_lab()
    lab.run("pve1", f"rm -rf {DIR} && mkdir -p {DIR}")
    return lab


def wait_for_log(lab) -> None:
    deadline = time.monotonic() + 30
    while lab.run("pve1", f"grep -q start {DIR}/log").rc != 0:
        assert time.monotonic() < deadline, "the first run never reached its slow step"
        time.sleep(0.05)


def test_second_run_fails_naming_the_holder(node, tmp_path):
    book = playbook(tmp_path)
    first = start(node, book)
    wait_for_log(node)
    started = time.monotonic()
    second = report_of(start(node, book, "--lock-wait", "1"))
    waited = time.monotonic() - started
    one = report_of(first)
    assert one["hosts"]["pve1"]["failed"] == 0, one["tasks"]
    failed = [t for t in second["tasks"] if t["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["task"] == "slow step", second["tasks"]
    error = failed[0]["error"]
    assert "another gpuhost run holds this node's run lock (/run/lock/gpuhost.lock); waited 1 s" in error
    assert re.search(rf"pid {first.pid}, started \S+, command: gpuhost run {re.escape(str(book))} ", error), error
    assert waited < 15
    log = node.run("pve1", f"cat {DIR}/log").stdout.split("\n")
    assert [line.split()[0] for line in log if line] == ["start", "end", "handler"]


def test_second_run_waits_then_converges(node, tmp_path):
    book = playbook(tmp_path)
    first = start(node, book)
    wait_for_log(node)
    second = report_of(start(node, book, "--lock-wait", "30"))
    one = report_of(first)
    assert one["hosts"]["pve1"]["failed"] == 0 and second["hosts"]["pve1"]["failed"] == 0, second["tasks"]
    # the second run planned the slow step while the first ran it, waited for the lock, read the node again
    # and found it done: the step ran once, never interleaved, and the handler once
    log = node.run("pve1", f"cat {DIR}/log").stdout.split("\n")
    assert [line.split()[0] for line in log if line] == ["start", "end", "handler"]
    assert node.run("pve1", f"cat {DIR}/marker").stdout == "converged\n"
    assert node.run("pve1", "test -e /run/lock/gpuhost.holder").rc == 1  # released with the run
    third = json.loads(gpuhost("run", str(book), "-i", str(node.inventory), "--limit", "pve1", "--json").stdout)
    assert third["hosts"]["pve1"]["changed"] == 0


def test_check_mode_does_not_wait_for_the_lock(node, tmp_path):
    book = playbook(tmp_path)
    first = start(node, book)
    wait_for_log(node)
    started = time.monotonic()
    check = gpuhost("run", str(book), "-i", str(node.inventory), "--limit", "pve1", "--check", "--lock-wait", "30")
    assert time.monotonic() - started < 10, "check mode waited for the lock"
    assert check.returncode == 0, check.stdout + check.stderr
    assert report_of(first)["hosts"]["pve1"]["failed"] == 0


def test_killed_run_holds_the_lock_until_its_remote_command_is_gone(node, tmp_path):
    """SIGKILL of a run in its slow step: its remote command is stopped before the lock is let go, so the next
    run never overlaps it (before: start-A, start-B, end-A, end-B)."""
    book = playbook(tmp_path)
    first = start(node, book)
    wait_for_log(node)
    first.kill()
    first.communicate(timeout=30)
    second = report_of(start(node, book, "--lock-wait", "30"))
    assert second["hosts"]["pve1"]["failed"] == 0, second["tasks"]
    time.sleep(7)  # past the killed command's own end, had it lived
    log = [line.split() for line in node.run("pve1", f"cat {DIR}/log").stdout.splitlines() if line]
    assert [entry[0] for entry in log] == ["start", "start", "end", "handler"], log
    assert log[0][1] != log[1][1] and log[2][1] == log[1][1], log  # the end is the second run's
    assert node.run("pve1", "ls /run/gpuhost/ 2>/dev/null").stdout == ""  # the registries went with the locks


def test_sigterm_ends_the_run_with_an_end_event_and_stops_its_remote_command(node, tmp_path):
    book = playbook(tmp_path)
    proc = subprocess.Popen(
        gpuhost_cmd("run", str(book), "-i", str(node.inventory), "--limit", "pve1", "--json-events"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gpuhost_env(),
    )
    wait_for_log(node)
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, out + err
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert events[-1]["event"] == "end" and events[-1]["exit_code"] == 1, events[-1]
    assert events[-1]["hosts"]["pve1"]["unreachable"] is False
    failed = [e for e in events if e.get("status") == "failed"]
    assert failed and "interrupted by SIGTERM" in failed[0]["error"], failed
    assert "internal error" not in err
    time.sleep(7)  # past the slow step's own end, had it lived
    log = [line.split()[0] for line in node.run("pve1", f"cat {DIR}/log").stdout.splitlines() if line]
    assert log == ["start"], log
    assert node.run("pve1", "test -e /run/lock/gpuhost.holder").rc == 1
