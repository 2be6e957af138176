"""Carry out an operation's actions on a host (consent was decided before, in :mod:`gpuhost.runner.run`)."""

from __future__ import annotations

from gpuhost.connection.base import Rebootable
from gpuhost.core.actions import Action, InGuest, PveCall, RebootHost, RestartGuest, RunCommand, WriteFile
from gpuhost.errors import OperationFailed
from gpuhost.runner.context import RunnerHost


def apply(host: RunnerHost, action: Action) -> None:
    host.round_trips += 1
    if isinstance(action, WriteFile):
        host.conn.write_file(
            action.path, action.content, mode=action.mode, backup=action.backup, backup_dir=action.backup_dir
        )
    elif isinstance(action, RunCommand):
        result = host.conn.run(action.command, ok_codes=action.ok_codes, timeout=action.timeout)
        (host.parent or host).command_output.append(result.stdout)
    elif isinstance(action, RebootHost):
        reboot(host, action)
    elif isinstance(action, PveCall):
        call(host, action)
    elif isinstance(action, RestartGuest):
        call(host, action.call)
        host.restarts_needed.discard(action.guest)
    elif isinstance(action, InGuest):
        apply(host.guest(action.guest), action.action)
    else:  # pragma: no cover - exhaustive
        raise TypeError(action)
    host.invalidate_facts()


def call(host: RunnerHost, action: PveCall) -> None:
    result = host.pve.call(action.method, action.path, dict(action.params))
    if action.wait:
        host.pve.wait_task(result)


def reboot(host: RunnerHost, action: RebootHost) -> None:
    conn = host.conn
    if not isinstance(conn, Rebootable):
        raise OperationFailed(
            f"{host.name}: will not reboot through a {type(conn).__name__} (the machine gpuhost runs on, or a guest)"
        )
    from gpuhost.runner.rolling import after_reboot, before_reboot

    guard = before_reboot(host.conn, allow_serving=host.allow_reboot_serving)
    conn.reboot(action.timeout)
    after_reboot(host.conn, guard)
    host.rebooted = True
    host.reboot_needed = None
