"""Stopping what a remote command started, when gpuhost stops waiting for it.

OpenSSH runs each command of a session without a terminal in a session of its own (sshd ``do_exec_no_pty``
calls ``setsid()``, openssh-portable session.c), and closing the channel does not signal it
(``session_close_by_channel`` only cleans up a pty): a command that timed out, or whose controller was killed,
runs on. So every command gpuhost sends first names its session on stderr (:data:`SID_PREFIX`, stripped from the
output), and, while the node's run lock is held, appends it to the run's registry (:func:`registry_path`):

* on a timeout gpuhost kills that session on a channel of its own (:func:`kill_session_command`);
* when the run ends, is killed or loses its connection, the lock's holder shell kills every session of the
  registry before it lets the lock go (:mod:`gpuhost.runner.node_lock`), so the next run never overlaps
  a command of the last one.

A process that left the session on purpose (a daemon: ``qemu -daemonize``, ``lxc-start``, anything
``systemctl`` starts) is not in it and is left alone. A session is killed only while its leader is the process
that was recorded (same start time), or, the leader gone, through the members still in it: a reused id is never
another process's.
"""

from __future__ import annotations

import os
import re
import shlex
import uuid

#: the first stderr line of each command: ``gpuhost-sid SID START``
SID_PREFIX = "gpuhost-sid "
#: a run of this controller process: names its registry on the node
RUN_ID = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
REGISTRY_DIR = "/run/gpuhost"


def registry_path(run_id: str = RUN_ID) -> str:
    return f"{REGISTRY_DIR}/sessions.{run_id}"


# field 6 of /proc/self/stat is the session id, field 22 the start time (proc(5)); the shell's own comm is
# "(sh)", without spaces, so plain word splitting finds them. Builtins only: no process more per command.
_PREFIX = (
    "read -r _ _ _ _ _ gpuhost_s _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ gpuhost_t _ </proc/self/stat 2>/dev/null"
    ' && {{ printf "{prefix}%s %s\\n" "$gpuhost_s" "$gpuhost_t" >&2;'
    ' [ -f {reg} ] && printf "%s %s\\n" "$gpuhost_s" "$gpuhost_t" >>{reg} 2>/dev/null; }}; '
    "unset gpuhost_s gpuhost_t\n"
)


def marked(command: str, run_id: str = RUN_ID) -> str:
    """``command`` preceded by the lines that name its session (on stderr, and in the run's registry when the
    run lock made one)."""
    return _PREFIX.format(prefix=SID_PREFIX, reg=shlex.quote(registry_path(run_id))) + command


#: the session line (:func:`marked`): the command's first words on stderr, after what the login printed before it
#: runs (sudo's "unable to resolve host", a profile's message)
SID_LINE = re.compile(rb"(?:^|(?<=\n))" + re.escape(SID_PREFIX.encode()) + rb"(\d+) (\d+)\n")


def split_sid(stderr: str) -> tuple[tuple[str, str] | None, str]:
    """(``(sid, start)`` the command reported, or None; stderr without that line, what came before it kept)."""
    data = stderr.encode(errors="surrogateescape")
    m = SID_LINE.search(data)
    if m is None:
        return None, stderr
    rest = data[: m.start()] + data[m.end() :]
    return (m[1].decode(), m[2].decode()), rest.decode(errors="surrogateescape")


#: kill session $1 whose leader started at $2 (see the module's docstring); KILL, so nothing lingers
KILL_SESSION = r"""
kill_session() {
    s=$1 t=$2
    if [ -r "/proc/$s/stat" ]; then
        read -r _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ now _ <"/proc/$s/stat" 2>/dev/null || now=
        [ "$now" = "$t" ] || return 0
    fi
    if command -v pkill >/dev/null 2>&1; then
        pkill -KILL -s "$s" 2>/dev/null
    else
        for st in /proc/[0-9]*/stat; do
            read -r p _ _ _ _ sid _ <"$st" 2>/dev/null || continue
            [ "$sid" = "$s" ] && kill -KILL "$p" 2>/dev/null
        done
    fi
    return 0
}
"""


def kill_session_command(sid: str, start: str) -> str:
    """The command that kills the session a timed-out command ran in."""
    return KILL_SESSION + f"kill_session {shlex.quote(sid)} {shlex.quote(start)}\n"


#: what the lock's holder runs when its channel ends: every recorded session killed, the registry removed
REAP_REGISTRY = (
    KILL_SESSION
    + r"""
reap_registry() {
    [ -f "$1" ] || return 0
    while read -r s t; do kill_session "$s" "$t"; done <"$1"
    rm -f -- "$1"
}
"""
)
