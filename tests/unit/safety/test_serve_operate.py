"""``gpuhost serve stop|restart|status`` (issue 31 items 5 and 8).

``serve stop`` without a target selection used to stop every server of the inventory; now it asks for --limit,
--ctid or --all. Stop and restart take the node's run lock, go on over the targets and end with a summary;
``serve status`` for a container that is not there says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import pytest

from gpuhost.connection.base import Connection, Stdin
from gpuhost.core.result import CommandResult
from gpuhost.inventory.loader import load_inventory
from gpuhost.runner.node_lock import held_on
from gpuhost.serve import service as serve_runner
from tests.unit.cli.test_malformed_input import Listener, _run, _write, inventory_text

SERVE = "    containers:\n      200: {serve: {profile: p, model: /srv/m}}\n      201: {serve: {profile: p, model: /srv/m}}\n"
#: pve-container's message for a CT without a config (PVE::AbstractConfig::load_config; the lab's guests.py:69)
MISSING = "Configuration file 'nodes/pve1/lxc/200.conf' does not exist"


@pytest.fixture(scope="module")
def listener() -> Listener:
    return Listener()


@pytest.mark.parametrize("verb", ["stop", "restart"])
def test_stop_or_restart_without_a_selection_is_refused_and_touches_nothing(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port, node_extra=SERVE))
    before = listener.accepted
    code, out = _run(capsys, ["serve", verb, "-i", str(inv)])
    assert code == 2, out
    assert f"serve {verb} acts on running servers" in out and "--limit" in out and "--all" in out
    assert listener.accepted == before


def test_stop_takes_the_run_lock_and_goes_on_after_a_failed_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuhost.runner.node_lock import NodeBusy

    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port, node_extra=SERVE))
    seen: list[tuple[int, str, float]] = []

    def control(
        inventory: object, t: serve_runner.ServeTarget, action: str, connect: object, *, lock: object, lock_wait: float
    ) -> str:
        seen.append((t.ctid, action, lock_wait))
        if t.ctid == 200:
            raise NodeBusy("pve1: another gpuhost run holds this node's run lock")
        return "inactive"

    monkeypatch.setattr(serve_runner, "control", control)
    code, out = _run(capsys, ["serve", "stop", "-i", str(inv), "--all", "--lock-wait", "3"])
    assert code == 1, out
    assert seen == [(200, "stop", 3.0), (201, "stop", 3.0)]
    assert "pve1/CT 201: inactive" in out and "run lock" in out
    assert "1 of 2 servers stopped; failed: pve1/CT 200" in out


def test_restart_goes_on_after_a_failed_target_with_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuhost.errors import ConfigError

    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port, node_extra=SERVE))

    def control(
        inventory: object, t: serve_runner.ServeTarget, action: str, connect: object, *, lock: object, lock_wait: float
    ) -> str:
        assert action == "restart"
        if t.ctid == 200:
            raise ConfigError("pve1/CT 200: no server launched by gpuhost to restart")
        return "active"

    monkeypatch.setattr(serve_runner, "control", control)
    code, out = _run(capsys, ["serve", "restart", "-i", str(inv), "--all"])
    assert code == 1, out
    assert "pve1/CT 201: restarted (active)" in out and "no server launched" in out
    assert "1 of 2 servers restarted; failed: pve1/CT 200" in out


class _Node(Connection):
    """A node whose CT 200 does not exist: ``pct status 200`` fails as PVE's does."""

    name = "pve1"

    def _exec(
        self, command: str, stdin: Stdin, timeout: float | None, stdout_sink: BinaryIO | None = None
    ) -> CommandResult:
        if command == "pct status 200" or command.startswith("pct exec 200 "):
            return CommandResult(command, 2, "", MISSING + "\n")
        return CommandResult(command, 0, "", "")

    def close(self) -> None:
        pass


def test_status_of_a_missing_container_says_so(tmp_path: Path, listener: Listener) -> None:
    inv = load_inventory(_write(tmp_path, "inventory.yml", inventory_text(listener.port, node_extra=SERVE)))
    rows = serve_runner.status(inv, ctids=[200], connect=lambda node: _Node())
    assert len(rows) == 1
    assert "CT 200 does not exist on pve1" in rows[0]["error"] and MISSING in rows[0]["error"]
    assert "gpu_memory_used_mib" not in rows[0]


class _Lock:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def read_until_line(self, timeout: float) -> str:
        self.log.append("lock taken")
        return "locked"

    def read_rest(self, timeout: float) -> str:
        return ""

    def alive(self) -> bool:
        return True

    def release(self) -> None:
        self.log.append("lock released")


class _LockingNode(Connection):
    name = "pve1"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def hold(self, command: object) -> _Lock:  # type: ignore[override]
        self.log.append("hold: " + " ".join(command))  # type: ignore[arg-type]
        return _Lock(self.log)

    def _exec(
        self, command: str, stdin: Stdin, timeout: float | None, stdout_sink: BinaryIO | None = None
    ) -> CommandResult:
        if "systemctl stop" in command:
            self.log.append("systemctl stop")
        return CommandResult(command, 0, "", "")

    def close(self) -> None:
        pass


def test_stop_runs_under_the_node_run_lock(tmp_path: Path, listener: Listener) -> None:
    inv = load_inventory(_write(tmp_path, "inventory.yml", inventory_text(listener.port, node_extra=SERVE)))
    log: list[str] = []
    serve_runner.control(
        inv, serve_runner.ServeTarget("pve1", 200), "stop", lambda node: _LockingNode(log), lock=held_on, lock_wait=2
    )
    assert [e.split(":")[0] for e in log] == ["hold", "lock taken", "systemctl stop", "lock released"], log
    assert "/run/lock/gpuhost.lock" in log[0]
