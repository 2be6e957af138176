"""The keeper's rules that need no host: whose folder it trusts, what names a kept connection, what it answers
for a node it does not hold, and the settings a run hands it (the host key always checked strictly)."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path

import pytest

from gpuhost.connection import persist
from gpuhost.connection.settings import SSHSettings
from gpuhost.inventory.models import NodeSpec


def node(**ssh: object) -> NodeSpec:
    return NodeSpec.model_validate({"name": "pve1", "address": "127.0.0.1", "ssh": {"persist": 60, **ssh}})


def test_only_a_folder_of_this_users_that_no_one_else_can_enter_is_trusted(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    link = tmp_path / "link"
    link.symlink_to(mine)
    assert [persist.private(p) for p in (mine, shared, link, tmp_path / "absent")] == [True, False, False, False]


def test_a_run_does_not_talk_to_a_keeper_in_a_folder_others_can_enter(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = tmp_path / "gpuhost"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    # a keeper refuses to start there, and a run asks nothing of whatever listens there
    r = subprocess.run(
        [sys.executable, "-m", "gpuhost.connection.persist"],
        input="",
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)},
        capture_output=True,
        timeout=30,
    )
    assert r.returncode == 1
    assert not (folder / persist.SOCKET).exists()
    assert persist.read(node(), "true", 5) is None
    assert persist.touch([node()]) == [False]


def test_a_kept_connection_is_named_by_the_address_the_ssh_settings_and_the_ssh_config(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config"
    config.write_text("Host *\n  User root\n")
    base = node(config_file=str(config))
    assert persist.identity(base) == persist.identity(node(config_file=str(config)))
    other_key = node(config_file=str(config), key_file="/root/.ssh/other")
    other_address = NodeSpec.model_validate(
        {"name": "pve1", "address": "127.0.0.2", "ssh": {"persist": 60, "config_file": str(config)}}
    )
    assert persist.identity(other_key) != persist.identity(base)
    assert persist.identity(other_address) != persist.identity(base)
    before = persist.identity(base)
    config.write_text("Host *\n  User admin\n")  # an edit of ~/.ssh/config: a new connection
    assert persist.identity(node(config_file=str(config))) != before


def test_the_same_address_in_another_network_namespace_is_another_kept_connection() -> None:
    code = "from tests.unit.connection.test_persist import node; from gpuhost.connection import persist; "
    code += "print(persist.identity(node()))"
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    there = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert here.strip() == persist.identity(node())
    assert there.strip() != here.strip()


def test_the_keeper_answers_not_held_for_a_node_it_does_not_hold() -> None:
    keeper = persist.Keeper()
    assert keeper.answer({"op": "run", "id": "0" * 32, "command": "true", "timeout": 5}) == {"held": False}
    assert keeper.answer({"op": "touch", "ids": ["0" * 32], "persist": [60]}) == {"kept": [False]}
    assert keeper.answer({"op": "reboot"}) == {"error": "unknown op"}


@pytest.mark.parametrize("policy", ["strict", "accept-new"])
def test_the_settings_a_run_sends_come_back_whole_with_host_keys_checked_strictly(policy: str) -> None:
    jump = SSHSettings(address="10.0.0.1", user="jump", key_file="/k/jump")
    sent = SSHSettings(
        address="10.0.0.2",
        key_file="/k/node",
        key_files=("/k/a", "/k/b"),
        host_key_policy=policy,  # type: ignore[arg-type]
        jump=jump,
        become=True,
        keepalive=5.0,
    )
    got = persist._settings(asdict(sent))
    assert got == SSHSettings(
        **{**asdict(sent), "key_files": ("/k/a", "/k/b"), "host_key_policy": "strict", "jump": jump}
    )


def test_the_keeper_logs_in_with_a_password_and_then_holds_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuhost.connection import ssh

    seen: list[SSHSettings] = []

    class Connection:
        def __init__(self, name: str, settings: SSHSettings) -> None:
            seen.append(settings)
            self.settings = settings

    monkeypatch.setattr(ssh, "SSHConnection", Connection)
    jump = SSHSettings(address="192.0.2.1", user="hop", password="jump-secret-1")
    settings = SSHSettings(address="192.0.2.10", user="root", password="node-secret-1", jump=jump)
    kept = persist._Kept("pve1", settings, 60)
    kept.open()
    assert seen[0].password == "node-secret-1"
    assert seen[0].jump is not None and seen[0].jump.password == "jump-secret-1"
    for held in (kept.settings, kept.conn.settings):  # type: ignore[union-attr]
        assert held.password is None
        assert held.jump is not None and held.jump.password is None
        assert (held.address, held.user, held.jump.address) == ("192.0.2.10", "root", "192.0.2.1")


class _HeldRead:
    """A held connection whose read waits until ``after`` is set (at most 10 s), and says whether it was."""

    def __init__(self, output: bytes, after: threading.Event | None = None) -> None:
        self.output, self.after = output, after

    def run(self, command: str, timeout: float | None) -> dict:
        waited = b"" if self.after is None else b"after:" if self.after.wait(10) else b"alone:"
        stdout = base64.b64encode(waited + self.output + command.encode()).decode()
        return {"held": True, "exit": 0, "stdout": stdout, "stderr": ""}


def test_reads_sent_in_one_request_are_run_at_once_and_each_answered_as_it_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = persist.runtime_dir()
    folder.mkdir(mode=0o700)
    slow, fast = node(), NodeSpec.model_validate({"name": "pve2", "address": "127.0.0.2", "ssh": {"persist": 60}})
    gone = NodeSpec.model_validate({"name": "pve3", "address": "127.0.0.3", "ssh": {"persist": 60}})
    fast_came = threading.Event()
    keeper = persist.Keeper()
    # the first read finishes only once the second's answer reached the run: run one after the other, it would not
    keeper.kept[persist.identity(slow)] = _HeldRead(b"slow:", after=fast_came)  # type: ignore[assignment]
    keeper.kept[persist.identity(fast)] = _HeldRead(b"fast:")  # type: ignore[assignment]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / persist.SOCKET))
    server.listen(1)
    threading.Thread(target=lambda: keeper.serve_one(server.accept()[0]), daemon=True).start()
    came: list[tuple[int, object]] = []

    def deliver(i: int, answer: object) -> None:
        came.append((i, answer))
        if i == 1:
            fast_came.set()

    persist.read_all([(slow, "cat /a"), (fast, "cat /b"), (gone, "cat /c")], deliver)
    server.close()
    assert sorted(came, key=lambda c: c[0]) == [
        (0, (0, b"after:slow:cat /a", "")),  # it did see the second read answered first
        (1, (0, b"fast:cat /b", "")),
        (2, None),
    ]
    assert [i for i, _a in came].index(1) < [i for i, _a in came].index(0)


def test_reads_no_keeper_answers_are_each_delivered_as_not_answered(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "gpuhost").mkdir(mode=0o700)
    came: list[tuple[int, object]] = []
    persist.read_all([(node(), "true"), (node(), "false")], lambda i, answer: came.append((i, answer)))
    assert came == [(0, None), (1, None)]
