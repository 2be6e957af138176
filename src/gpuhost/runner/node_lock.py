"""The per-node run lock: one gpuhost run changes a node at a time.

The lock is an ``flock`` on ``/run/lock/gpuhost.lock`` held by a shell on the node, on an SSH channel of
its own, for as long as the run holds the connection: the shell waits on its stdin, which ends when the
run closes the channel, ends, is killed, or its connection dies; the kernel then drops the lock. Under the
lock the holder writes who it is (controller host, pid, start time, command line) to
``/run/lock/gpuhost.holder``, so that a run that waited in vain names it.

It is taken lazily, right before the first change is applied (not before the first task): a converged run
only reads, and a run that reads while another changes the node re-reads the node once it holds the lock
(the runner re-plans that task), so nothing it decides rests on what it read before. ``--check`` never
takes it: it changes nothing and must not make a real run wait. A run that lost it (the node rebooted)
takes it again before its next change. Connections that cannot hold a channel open (``connection:
local``, the machine gpuhost runs on) are not locked.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from gpuhost.connection.base import Held
from gpuhost.connection.remote_kill import REAP_REGISTRY, registry_path
from gpuhost.errors import ConnectionFailed, GpuhostError

if TYPE_CHECKING:
    from gpuhost.connection.base import Connection
    from gpuhost.inventory.models import NodeSpec

LOCK_FILE = "/run/lock/gpuhost.lock"
HOLDER_FILE = "/run/lock/gpuhost.holder"
#: seconds a run waits for another run's lock before it fails naming the holder
DEFAULT_WAIT = 10.0
BUSY = 75

_SCRIPT = (
    REAP_REGISTRY
    + r"""
l=$1 h=$2 wait=$3 me=$4 reg=$5
mkdir -p -- "$(dirname -- "$l")" || exit 1
exec 9>>"$l" || exit 1
if ! flock -w "$wait" 9; then printf 'busy\n'; cat -- "$h" 2>/dev/null; exit 75; fi
printf '%s\n' "$me" > "$h"
mkdir -p -- "$(dirname -- "$reg")" && : >>"$reg"
printf 'locked\n'
cat >/dev/null 9>&-
reap_registry "$reg"
rm -f -- "$h"
"""
)

_STARTED = time.strftime("%Y-%m-%dT%H:%M:%S%z")


class NodeBusy(GpuhostError):
    """Another gpuhost run holds the node's run lock."""


def holder_record() -> str:
    """Who this run is, as the holder file records it."""
    command = shlex.join(["gpuhost", *sys.argv[1:]])
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": _STARTED, "command": command})


def describe_holder(text: str) -> str:
    try:
        h = json.loads(text)
        return f"host {h['host']}, pid {h['pid']}, started {h['started']}, command: {h['command']}"
    except (ValueError, TypeError, KeyError):
        return "holder unknown (no record in " + HOLDER_FILE + ")"


def take(name: str, held: Held | None, wait: float, grace: float) -> Held | None:
    """Wait up to ``wait`` s for the lock on the channel ``held``; the channel, held, or :class:`NodeBusy`."""
    if held is None:
        return None
    first = held.read_until_line(wait + grace)
    if first == "locked":
        return held
    rest = held.read_rest(grace) if first == "busy" else ""
    held.release()
    if first == "busy":
        raise NodeBusy(
            f"{name}: another gpuhost run holds this node's run lock ({LOCK_FILE}); waited {wait:g} s. "
            f"Holder: {describe_holder(rest.strip())}. Let it finish, or rerun with a longer --lock-wait"
        )
    raise ConnectionFailed(name, f"could not take the run lock {LOCK_FILE} (flock printed {first!r})")


def command(wait: float) -> list[str]:
    """The holder shell: takes the lock, holds it while its stdin is open, then kills every command session this
    run left (:mod:`gpuhost.connection.remote_kill`) and only then lets the lock go."""
    return [
        "sh",
        "-c",
        _SCRIPT,
        "gpuhost-lock",
        LOCK_FILE,
        HOLDER_FILE,
        f"{wait:g}",
        holder_record(),
        registry_path(),
    ]


@contextmanager
def held_on(node: NodeSpec, conn: Connection, wait: float) -> Iterator[None]:
    """The node's run lock held over ``conn`` while the block runs (for work outside a run, such as ``gpuhost serve
    stop``): waits up to ``wait`` seconds for another run's lock, then raises :class:`NodeBusy`."""
    grace = node.ssh.keepalive * node.ssh.keepalive_count
    held = take(node.name, conn.hold(command(wait)), wait, grace)
    try:
        yield
    finally:
        if held is not None:
            held.release()
