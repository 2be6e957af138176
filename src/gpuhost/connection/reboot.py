"""Rebooting a machine over its own connection: ask, see it go, reconnect, wait for systemd."""

from __future__ import annotations

import time
from typing import Protocol

from gpuhost.core.progress import report
from gpuhost.core.result import CommandResult
from gpuhost.errors import ConnectionFailed, OperationFailed

BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


class _Session(Protocol):
    name: str

    def run(self, command: str, *, check: bool = True, timeout: float | None = None) -> CommandResult: ...

    def reconnect(self, timeout: float = 300.0, interval: float = 1.0) -> None: ...


def reboot_and_wait(conn: _Session, timeout: float) -> None:
    """Reboot, wait for the old session to die, reconnect, and wait until startup finished."""
    before = conn.run(BOOT_ID).stdout.strip()
    # Detached, so the command returns before the connection drops.
    conn.run("nohup sh -c 'sleep 1; reboot' >/dev/null 2>&1 &")
    start = time.monotonic()
    report(conn.name, "reboot", "going down", 0.0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if conn.run(BOOT_ID).stdout.strip() != before:
                break
        except ConnectionFailed:
            break
        time.sleep(0.5)
    else:
        raise OperationFailed(f"{conn.name}: asked to reboot, but it was still up after {timeout:.0f} s")
    # Either the boot id changed or the session dropped (a host sharing its kernel, such as
    # a container, keeps its boot id): both mean the restart happened.
    report(conn.name, "reboot", "down; waiting for SSH", time.monotonic() - start)
    conn.reconnect(timeout=max(deadline - time.monotonic(), 30.0))
    report(conn.name, "reboot", "back on SSH; systemd starting", time.monotonic() - start)
    wait_for_boot(conn, max(deadline - time.monotonic(), 30.0))
    report(conn.name, "reboot", "up (systemd finished starting)", time.monotonic() - start)


def wait_for_boot(conn: _Session, timeout: float) -> None:
    """SSH answers before every unit ran (nvidia-devnodes, pve-guests…): wait for systemd's startup
    to finish. ``degraded`` (a unit failed) is still the end of startup; verification says what broke."""
    result = conn.run("systemctl is-system-running --wait", check=False, timeout=timeout)
    state = result.stdout.strip()
    if result.exit_code == 124:
        raise OperationFailed(f"{conn.name}: still booting after {timeout:.0f} s ({state or 'no answer'})")
