"""Waiting as an action: the runner polls a wait an operation returns; check mode only says what it would wait for;
an interrupted run ends its waits at once; and no operation polls or sleeps by itself."""

from __future__ import annotations

import ast
import socket
import time
from pathlib import Path

from gpuhost.core.actions import WaitUntil
from gpuhost.core.facts import Fact
from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.runner.run import RunOptions, run_playbook
from gpuhost.runner.wait import WaitInterrupted, run_wait
from tests.support.local import local_inventory
from tests.wait_harness import Clock, Readings

OPERATIONS = Path(__file__).resolve().parents[3] / "src" / "gpuhost" / "operations"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rendezvous_play(tmp_path: Path, port: int, timeout: float) -> Path:
    book = tmp_path / "play.yml"
    book.write_text(
        f"""
- hosts: all
  tasks:
    - name: rank 0 reached
      sglang_rendezvous: {{host: 127.0.0.1, port: {port}, rank0: "pve9/CT 200", timeout_s: {timeout}, poll_s: 0.2}}
"""
    )
    return book


def test_check_mode_says_what_would_be_waited_for_and_polls_nothing(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    inv = load_inventory(local_inventory(tmp_path, ["h1"]))
    start = time.monotonic()
    report = run_playbook(load_playbook(rendezvous_play(tmp_path, port, 900)), inv, RunOptions(check=True))
    (result,) = report.results
    assert time.monotonic() - start < 30  # not the 15 minutes the wait may take
    assert result.status == "skipped" and report.exit_code == 0
    assert result.reason == (
        f"check mode: would wait up to 15.0 min (every 0.2 s) until pve9/CT 200's rendezvous 127.0.0.1:{port} "
        "answers from here"
    )
    assert report.hosts["h1"].round_trips <= 2  # the plan's one look (and the run's own), no polling


def test_the_runner_polls_until_done_and_gives_up_at_the_bound(tmp_path: Path) -> None:
    port = free_port()
    inv = load_inventory(local_inventory(tmp_path, ["h1"]))
    report = run_playbook(load_playbook(rendezvous_play(tmp_path, port, 1)), inv)
    (result,) = report.results
    assert result.status == "failed" and report.exit_code != 0
    assert result.error is not None and result.error.startswith(
        f"gave up after 1 s waiting until pve9/CT 200's rendezvous 127.0.0.1:{port} answers from here (connection refused)"
    )
    with socket.socket() as listener:  # rank 0 listens: the wait ends at the first look
        listener.bind(("127.0.0.1", port))
        listener.listen()
        report = run_playbook(load_playbook(rendezvous_play(tmp_path, port, 1)), inv)
    (result,) = report.results
    assert result.status == "ok" and result.reason == f"pve9/CT 200's rendezvous 127.0.0.1:{port} answers from here"


def test_an_interrupted_run_ends_the_wait_at_once() -> None:
    fact: Fact[int] = Fact("counter", lambda: "true", lambda r: 0, live=True)
    wait = WaitUntil(what="the counter reaches 1", fact=fact, done=lambda v: None, failed=lambda v: None, timeout=3600)
    clock = Clock()
    host = Readings({"counter": iter([0] * 10)})
    try:
        run_wait(host, wait, clock=clock, pause=lambda s: True)  # SIGINT/SIGTERM set the stop event
    except WaitInterrupted as exc:
        assert (
            str(exc) == "pve1: interrupted after 0 s waiting until the counter reaches 1 (waiting); nothing was stopped"
        )
    else:
        raise AssertionError("the wait went on")
    assert host.looks == 1


def test_a_failure_is_confirmed_by_one_more_look() -> None:
    fact: Fact[str] = Fact("journal", lambda: "true", lambda r: "", live=True)
    wait = WaitUntil(
        what="up",
        fact=fact,
        done=lambda v: None,
        failed=lambda v: f"crashed: {v}" if v else None,
        timeout=3600,
    )
    clock = Clock()
    host = Readings({"journal": iter(["", "Scheduler hit an exception", "CUDA out of memory"])})
    out = run_wait(host, wait, clock=clock, pause=clock.pause)
    assert not out.ok and out.message == "crashed: CUDA out of memory" and host.looks == 3


def test_no_operation_sleeps_or_polls() -> None:
    found = []
    for path in sorted(OPERATIONS.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("sleep", "monotonic", "monotonic_ns", "perf_counter"):
                found.append(f"{path.name}:{node.lineno} {node.attr}")
            if isinstance(node, ast.While):
                found.append(f"{path.name}:{node.lineno} while loop")
            if isinstance(node, ast.ImportFrom) and node.module == "time":
                found += [f"{path.name}:{node.lineno} from time import {a.name}" for a in node.names]
    assert found == [], "operations must return a WaitUntil, not poll:\n" + "\n".join(found)
