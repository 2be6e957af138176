"""Carry out an operation's actions on a host."""

from __future__ import annotations

import time

from gpuhost.connection.ssh import SSHConnection
from gpuhost.errors import ConnectionFailed, OperationFailed
from gpuhost.facts.system import boot_id
from gpuhost.operations.actions import Action, InContainer, PveCall, Reboot, RunCommand, WriteFile
from gpuhost.runner.context import HostContext


def apply(host: HostContext, action: Action) -> None:
    if isinstance(action, WriteFile):
        host.conn.write_file(action.path, action.content, mode=action.mode, backup=action.backup,
                             backup_dir=action.backup_dir)
    elif isinstance(action, RunCommand):
        host.conn.run(action.command, ok_codes=action.ok_codes, timeout=action.timeout)
    elif isinstance(action, Reboot):
        reboot(host, action)
    elif isinstance(action, PveCall):
        result = host.pve.call(action.method, action.path, dict(action.params))
        if action.wait:
            host.pve.wait_task(result)
    elif isinstance(action, InContainer):
        apply(host.guest(action.ctid), action.action)
    else:  # pragma: no cover - exhaustive
        raise TypeError(action)
    host.invalidate_facts()


def reboot(host: HostContext, action: Reboot) -> None:
    """Reboot, wait for the old session to die, reconnect, and make sure the host really rebooted."""
    conn = host.conn
    if not isinstance(conn, SSHConnection):
        raise OperationFailed(f"{host.name}: will not reboot the machine gpuhost runs on")
    before = boot_id(conn)
    # Detached, so the command returns before the connection drops.
    conn.run("nohup sh -c 'sleep 1; reboot' >/dev/null 2>&1 &")
    deadline = time.monotonic() + action.timeout
    while time.monotonic() < deadline:
        try:
            if boot_id(conn) != before:
                break
        except ConnectionFailed:
            break
        time.sleep(0.5)
    else:
        raise OperationFailed(f"{host.name}: asked to reboot, but it was still up after {action.timeout:.0f} s")
    # Either the boot id changed or the session dropped (a host sharing its kernel, such as
    # a container, keeps its boot id): both mean the restart happened.
    conn.reconnect(timeout=max(deadline - time.monotonic(), 30.0))
    wait_for_boot(conn, max(deadline - time.monotonic(), 30.0))
    host.rebooted = True
    host.reboot_required = False


def wait_for_boot(conn: SSHConnection, timeout: float) -> None:
    """SSH answers before every unit ran (nvidia-devnodes, pve-guests…): wait for systemd's startup
    to finish. ``degraded`` (a unit failed) is still the end of startup; verification says what broke."""
    result = conn.run("systemctl is-system-running --wait", check=False, timeout=timeout)
    state = result.stdout.strip()
    if result.exit_code == 124:
        raise OperationFailed(f"{conn.name}: still booting after {timeout:.0f} s ({state or 'no answer'})")
