"""Rebooting a machine over its own connection: ask, see it go, reconnect, wait for systemd."""

from __future__ import annotations

import posixpath
import shlex
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


#: the reboot request, detached so that the command returns before the connection drops
REQUEST = "nohup sh -c 'sleep 1; reboot' >/dev/null 2>&1 &"


def request_command(record: tuple[str, str] | None) -> str:
    """The remote command that issues the reboot. With ``record`` (path, one line) the detached script that
    reboots first writes the record (a temp file renamed into place) and reboots only once it is written: a
    record exists only for an issued reboot and an issued reboot always has its record, wherever the client is
    killed (the script is immune to the session's hangup)."""
    if record is None:
        return REQUEST
    path, content = record
    if "\n" in content.rstrip("\n"):
        raise ValueError("a reboot record is one line")
    q = shlex.quote
    tmp = f"{path}.gpuhost-tmp"
    script = (
        f"mkdir -p {q(posixpath.dirname(path) or '/')} && printf '%s\\n' {q(content.rstrip())} > {q(tmp)} && "
        f"mv -f {q(tmp)} {q(path)} && sleep 1 && reboot"
    )
    return f"nohup sh -c {q(script)} >/dev/null 2>&1 &"


def reboot_and_wait(conn: _Session, timeout: float, record: tuple[str, str] | None = None) -> None:
    """Reboot (writing ``record`` with the request), wait for the old session to die, reconnect, and wait until
    startup finished."""
    before = conn.run(BOOT_ID).stdout.strip()
    conn.run(request_command(record))
    start = time.monotonic()
    report(conn.name, "reboot", "going down", 0.0)
    deadline = time.monotonic() + timeout
    if not _went_down(conn, before, deadline):
        raise OperationFailed(f"{conn.name}: asked to reboot, but it was still up after {timeout:.0f} s")
    _come_back(conn, start, deadline)


#: how long a reboot asked for by an earlier run (killed as it asked) may take to start before it counts as lost
PENDING_GRACE_S = 60.0


def await_pending_reboot(conn: _Session, boot_id: str, timeout: float) -> bool:
    """A reboot asked for from boot ``boot_id`` by an earlier run: wait for it and for the node to come back; False
    when the node is up on another boot already, or the reboot did not start within :data:`PENDING_GRACE_S`."""
    start = time.monotonic()
    try:
        if conn.run(BOOT_ID).stdout.strip() != boot_id:
            return False
    except ConnectionFailed:
        pass  # going down now
    report(conn.name, "reboot", "a reboot asked for before is under way; waiting for it", 0.0)
    if not _went_down(conn, boot_id, start + PENDING_GRACE_S):
        report(conn.name, "reboot", f"it did not start within {PENDING_GRACE_S:.0f} s; asking again")
        return False
    _come_back(conn, start, start + timeout)
    return True


def _went_down(conn: _Session, before: str, deadline: float) -> bool:
    """Until the boot id changes or the session drops (a host sharing its kernel, such as a container, keeps its
    boot id): both mean the restart happened. False when neither happened by ``deadline``."""
    while time.monotonic() < deadline:
        try:
            if conn.run(BOOT_ID).stdout.strip() != before:
                return True
        except ConnectionFailed:
            return True
        time.sleep(0.5)
    return False


def _come_back(conn: _Session, start: float, deadline: float) -> None:
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
