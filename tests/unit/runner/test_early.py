"""Reads sent to the keeper before the run begins (runner/early.py): which nodes get one, and how the run takes it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from gpuhost.core.result import KeptAnswer
from gpuhost.inventory.loader import load_inventory
from gpuhost.runner import early, remembered

NODES = {"a": 60, "b": 0, "c": 60, "d": 60}  # ssh.persist of each node


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    lines = ["nodes:"]
    for i, (name, persist) in enumerate(NODES.items(), start=1):
        lines += [f"  {name}:", f"    address: 127.0.0.{i}", "    ssh:", f"      persist: {persist}"]
    (tmp_path / "inventory.yml").write_text("\n".join(lines) + "\n")
    inventory = load_inventory(tmp_path / "inventory.yml")
    playbook = tmp_path / "play.yml"
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    for name in ("a", "b", "d"):  # c has no record: its last run read nothing
        record = remembered.record_path(cache, playbook, tmp_path / "inventory.yml", name)
        record.write_text(
            json.dumps({"schema": remembered.SCHEMA, "node": [f"cat /etc/{name}"], "first": [], "lxc": {}})
        )
        record.chmod(0o600)
    return inventory, playbook, cache


def keeper(monkeypatch: pytest.MonkeyPatch, answers: dict[str, KeptAnswer], gate: threading.Event | None = None):
    """persist.read_all as a keeper holding the nodes in ``answers`` would answer (after ``gate``, when given);
    returns the requests it was sent, each a list of (node, command)."""
    requests: list[list[tuple[str, str]]] = []

    def read_all(reads, deliver) -> None:
        requests.append([(n.name, c) for n, c in reads])
        if gate is not None:
            gate.wait(5)
        for i, (n, _c) in enumerate(reads):
            deliver(i, answers.get(n.name))

    monkeypatch.setattr("gpuhost.connection.persist.read_all", read_all)
    return requests


def test_each_persisting_node_with_a_record_that_limit_keeps_is_read_early_in_one_request(setup, monkeypatch) -> None:
    inventory, playbook, cache = setup
    requests = keeper(monkeypatch, {})
    sent = early.EarlyReads()
    sent.send(inventory, playbook, cache, "all:!d")
    assert sent._thread is not None
    sent._thread.join(5)
    command = remembered.command_of(remembered.Record(["cat /etc/a"], [], {}))
    assert requests == [[("a", command)]]
    sent = early.EarlyReads()
    sent.send(inventory, playbook, cache, None)
    assert sent._thread is not None
    sent._thread.join(5)
    d = remembered.command_of(remembered.Record(["cat /etc/d"], [], {}))
    assert requests[1] == [("a", command), ("d", d)]  # b keeps no connection, c has no record


def test_the_run_takes_the_early_answer_once_for_that_command_and_reads_anything_else(setup, monkeypatch) -> None:
    inventory, playbook, cache = setup
    gate = threading.Event()
    keeper(monkeypatch, {"a": (0, b"early", "")}, gate)
    batch = remembered.command_of(remembered.Record(["cat /etc/a"], [], {}))
    later: list[str] = []

    def kept(command: str) -> KeptAnswer:
        later.append(command)
        return 0, b"later", ""

    sent = early.EarlyReads()
    sent.send(inventory, playbook, cache, None)
    read = sent.reader("a", kept)
    assert read is not None
    assert read("other") == (0, b"later", "")
    gate.set()
    assert read(batch) == (0, b"early", "")  # waited for the answer sent early
    assert read(batch) == (0, b"later", "")  # once: asked again, it is read again
    assert later == ["other", batch]
    assert sent.reader("b", kept) is kept  # nothing was sent for b
    assert sent.reader("a", kept) is kept  # a's early read was taken


def test_an_early_read_the_keeper_could_not_answer_is_not_asked_of_it_again(setup, monkeypatch) -> None:
    inventory, playbook, cache = setup
    keeper(monkeypatch, {})  # the keeper holds no connection to any node
    batch = remembered.command_of(remembered.Record(["cat /etc/a"], [], {}))
    asked: list[str] = []
    sent = early.EarlyReads()
    sent.send(inventory, playbook, cache, None)
    read = sent.reader("a", lambda command: asked.append(command) or (0, b"kept", ""))
    assert read is not None and read(batch) is None  # the run reads it over its own connection
    assert asked == []


def test_no_keeper_at_all_answers_each_early_read_with_none(setup, tmp_path: Path, monkeypatch) -> None:
    inventory, playbook, cache = setup
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))  # no keeper listens there
    batch = remembered.command_of(remembered.Record(["cat /etc/d"], [], {}))
    sent = early.EarlyReads()
    sent.send(inventory, playbook, cache, None)
    read = sent.reader("d", lambda command: (0, b"kept", ""))
    assert read is not None and read(batch) is None


def test_the_run_takes_each_record_read_early_once_and_reads_the_others_itself(setup, monkeypatch) -> None:
    inventory, playbook, cache = setup
    keeper(monkeypatch, {})
    sent = early.EarlyReads()
    sent.send(inventory, playbook, cache, None)
    path = remembered.records(cache, playbook, Path(inventory.path))
    assert sent.record(path("a")) == remembered.Record(["cat /etc/a"], [], {})
    assert sent.record(path("a")) is None  # taken
    assert sent.record(path("b")) is None  # persist: 0, never read early
    assert sent.record(path("c")) == remembered.Record()  # read early: no record, so an empty one
