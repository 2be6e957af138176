"""One shell kept open on a kept connection, running its reads one after another (the keeper's, ``ssh.persist``).

Each command sent over SSH is a session of its own: a channel opened, sshd forks a child that sets up the
session and starts the login shell, the shell starts, and all of it ends with the command. On a node's own CPUs
that is a few milliseconds a read, paid again by every converged run over a kept connection. The keeper therefore
starts the login shell once (``$SHELL -s``, or ``sh -s`` through ``sudo -n`` with ``become``: the same shell a
command of its own would run in) and writes each read to it:

    printf '%s\\n' NONCE; printf '%s\\n' NONCE >&2
    ( eval 'COMMAND'
    ) </dev/null; printf '\\n%s %s\\n' NONCE "$?"; printf '\\n%s\\n' NONCE >&2

The command runs in a subshell (an ``exit``, a ``cd`` or a variable of its own ends with it), with nothing to read,
and its output and error output are what lies between the markers of each stream. ``NONCE`` is new for each read
(128 random bits the node never saw before the read began), so no output can end a frame early. Anything found
outside a frame (something a command left running still writing) means the shell cannot vouch for the next read:
it is closed and that read goes another way. A read that passes its timeout kills the shell's session (as a
timed-out command's, :mod:`gpuhost.connection.remote_kill`), and the shell is gone with it.
"""

from __future__ import annotations

import secrets
import shlex
import threading
import time
from typing import TYPE_CHECKING

from gpuhost.connection import remote_kill
from gpuhost.connection.paramiko_import import paramiko
from gpuhost.connection.watchdog import Watchdog
from gpuhost.core.result import TIMEOUT_EXIT, KeptAnswer

if TYPE_CHECKING:
    from gpuhost.connection.ssh import SSHConnection

_CHUNK = 65536
#: after a read's output ended, how long its error output's last marker may take to follow
_STDERR_LAG = 5.0


class ReadShell:
    """A login shell on ``conn``'s node that runs read-only commands, one at a time (callers serialise)."""

    def __init__(self, conn: SSHConnection) -> None:
        self.conn = conn
        self.chan = conn.open_channel(remote_kill.marked(_SHELL_BECOME if conn.settings.become else _SHELL))
        self._out = b""
        self._err = b""
        self._err_ended = False
        self._err_seen = threading.Condition()
        self.session: tuple[str, str] | None = None
        self.ended = False
        #: reads answered so far
        self.answered = 0
        threading.Thread(target=self._read_stderr, name="gpuhost-read-shell-stderr", daemon=True).start()

    def _read_stderr(self) -> None:
        try:
            while data := self.chan.recv_stderr(_CHUNK):
                with self._err_seen:
                    self._err += data
                    if self.session is None and (m := remote_kill.SID_LINE.search(self._err)) is not None:
                        self.session = m[1].decode(), m[2].decode()
                        self._err = self._err[: m.start()] + self._err[m.end() :]
                    self._err_seen.notify_all()
        except (paramiko.SSHException, OSError, EOFError):
            pass
        finally:
            with self._err_seen:
                self._err_ended = True
                self._err_seen.notify_all()

    def run(self, command: str, timeout: float | None) -> KeptAnswer:
        """``command``'s exit status, output and error output; None when this shell could not run it (it ended,
        or left something outside a frame): the shell is then closed and the caller reads another way."""
        if self.ended:
            return None
        nonce = secrets.token_hex(16)
        script = (
            f"printf '%s\\n' {nonce}; printf '%s\\n' {nonce} >&2\n"
            f"( eval {shlex.quote(command)}\n) </dev/null; "
            f"printf '\\n%s %s\\n' {nonce} \"$?\"; printf '\\n%s\\n' {nonce} >&2\n"
        )
        transport = self.chan.get_transport()
        if transport is None:
            self.close()
            return None
        s = self.conn.settings
        watch = Watchdog(transport, timeout, s.keepalive, s.keepalive_count)
        watch.start(self.chan)
        try:
            self.chan.sendall(script.encode())
            framed = self._stdout_frame(nonce.encode(), watch)
            stderr = self._stderr_frame(nonce.encode()) if framed is not None else None
        except (paramiko.SSHException, OSError, EOFError):
            framed = stderr = None
        finally:
            watch.stop()
        if framed is not None and stderr is not None:
            self.answered += 1
            if watch.timed_out:
                self.close()  # it answered as its time ran out; the watchdog closed the channel
            return framed[0], framed[1], stderr.decode(errors="replace")
        if watch.timed_out:
            self._kill()
            start = nonce.encode() + b"\n"
            out = self._out[len(start) :] if self._out.startswith(start) else b""
            return TIMEOUT_EXIT, out, f"timed out after {timeout:g} s"
        self.close()
        return None

    def _stdout_frame(self, nonce: bytes, watch: Watchdog) -> tuple[int, bytes] | None:
        start = nonce + b"\n"
        end = b"\n" + nonce + b" "
        while True:
            if not self.answered and (at := self._out.find(start)) > 0:
                self._out = self._out[at:]  # what the login printed before the first read (a profile's message)
            if self._out and not start.startswith(self._out[: len(start)]) and self.answered:
                return None  # output outside a frame: something still writes
            at = self._out.find(end, len(start))
            if self._out.startswith(start) and at >= 0:
                line_end = self._out.find(b"\n", at + len(end))
                if line_end >= 0:
                    code = self._out[at + len(end) : line_end]
                    body, self._out = self._out[len(start) : at], self._out[line_end + 1 :]
                    return (int(code), body) if code.isdigit() else None
            data = self.chan.recv(_CHUNK)
            if not data:
                return None
            watch.alive()
            self._out += data

    def _stderr_frame(self, nonce: bytes) -> bytes | None:
        start = nonce + b"\n"
        end = b"\n" + nonce + b"\n"
        deadline = time.monotonic() + _STDERR_LAG
        with self._err_seen:
            while True:
                if not self.answered and (at := self._err.find(start)) > 0:
                    self._err = self._err[at:]  # sudo's or a profile's words before the first read
                if self._err and not start.startswith(self._err[: len(start)]) and self.answered:
                    return None  # error output outside a frame: something still writes
                at = self._err.find(end, len(start))
                if self._err.startswith(start) and at >= 0:
                    body, self._err = self._err[len(start) : at], self._err[at + len(end) :]
                    return body
                left = deadline - time.monotonic()
                if self._err_ended or left <= 0:
                    return None
                self._err_seen.wait(left)

    def _kill(self) -> None:
        """Stop what the timed-out read left running: the shell's session, the shell with it."""
        if self.session is not None:
            self.conn.kill_session(*self.session)
        self.close()

    def close(self) -> None:
        self.ended = True
        try:
            self.chan.shutdown_write()  # the shell reads the end of its input and exits
        except (paramiko.SSHException, OSError, EOFError):
            pass
        self.chan.close()


#: the login shell the command would have run in, reading its commands from the channel
_SHELL = 'exec "${SHELL:-/bin/sh}" -s'
#: as root: the same ``sh`` that ``sudo -n`` runs a command of its own in (:meth:`SSHConnection._wire`)
_SHELL_BECOME = "exec sh -s"
