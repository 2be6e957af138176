"""Reads sent to the keeper before the run begins (runner/early.py): which nodes get one, and how the run takes it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

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
    asked: list[tuple[str, str]] = []

    def kept_reader(node):
        if not node.ssh.persist:
            return None

        def read(command: str):
            asked.append((node.name, command))
            return 0, f"read on {node.name}".encode(), ""

        return read

    monkeypatch.setattr("gpuhost.runner.connect.kept_reader", kept_reader)
    return inventory, playbook, cache, asked


def test_each_persisting_node_with_a_record_that_limit_keeps_is_read_early(setup) -> None:
    inventory, playbook, cache, asked = setup
    sent = early.EarlyReads()
    sent.send(inventory, playbook, cache, "all:!d")
    for s in sent._sent.values():
        s.thread.join()
    command = remembered.command_of(remembered.Record(["cat /etc/a"], [], {}))
    assert asked == [("a", command)]


def test_the_run_takes_the_early_answer_once_for_that_command_and_reads_anything_else() -> None:
    later: list[str] = []
    gate = threading.Event()

    def slow(command: str):
        gate.wait(5)
        return 0, b"early", ""

    sent = early.EarlyReads()
    sent._sent["a"] = early._Sent("batch", slow)

    def kept(command: str):
        later.append(command)
        return 0, b"later", ""

    read = sent.reader("a", kept)
    assert read is not None
    assert read("other") == (0, b"later", "")
    gate.set()
    assert read("batch") == (0, b"early", "")  # waited for the answer sent early
    assert read("batch") == (0, b"later", "")  # once: asked again, it is read again
    assert later == ["other", "batch"]
    assert sent.reader("b", kept) is kept  # nothing was sent for b


def test_an_early_read_the_keeper_could_not_answer_is_not_asked_of_it_again() -> None:
    asked: list[str] = []
    sent = early.EarlyReads()
    sent._sent["a"] = early._Sent("batch", lambda command: None)
    read = sent.reader("a", lambda command: asked.append(command) or (0, b"kept", ""))
    assert read is not None and read("batch") is None  # the run reads it over its own connection
    assert asked == []
