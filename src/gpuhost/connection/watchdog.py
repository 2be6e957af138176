"""Watch one SSH command: end it at its timeout, and notice a peer that stopped answering.

A frozen host (its processes stopped, a hung kernel, a cable pulled behind a NAT) keeps the
TCP connection open: the client's kernel sees no error for many minutes. So while a command
is silent for ``interval`` seconds the watchdog sends ``keepalive@openssh.com`` with
want-reply (OpenSSH answers it, with a failure, which is still an answer). When a keepalive
stays unanswered for ``interval * count`` seconds the peer is declared dead and the transport
is closed, which wakes every blocked read and write of the command.
"""

from __future__ import annotations

import threading
import time

from gpuhost.connection.paramiko_import import paramiko

_TICK = 0.1


class Watchdog:
    def __init__(self, transport: paramiko.Transport, timeout: float | None, interval: float, count: int) -> None:
        self.transport = transport
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.interval = interval
        self.count = max(1, count)
        self.timed_out = False
        self.dead = False
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._chan: paramiko.Channel | None = None
        self._thread: threading.Thread | None = None

    def start(self, chan: paramiko.Channel) -> None:
        self._chan = chan
        self._thread = threading.Thread(target=self._run, name="gpuhost-ssh-watchdog", daemon=True)
        self._thread.start()

    def alive(self) -> None:
        """Data moved: the peer is there."""
        self._last = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        probe: threading.Thread | None = None
        probe_sent = 0.0
        while not self._stop.wait(_TICK):
            now = time.monotonic()
            if self.deadline is not None and now >= self.deadline:
                self.timed_out = True
                if self._chan is not None:
                    self._chan.close()
                return
            if probe is not None:
                if not probe.is_alive():  # answered
                    probe = None
                    self._last = now
                elif now - probe_sent >= self.interval * self.count:
                    self.dead = True
                    self.transport.close()
                    return
                continue
            if now - self._last >= self.interval:
                probe = threading.Thread(target=self._probe, name="gpuhost-ssh-keepalive", daemon=True)
                probe_sent = now
                probe.start()

    def _probe(self) -> None:
        try:
            # returns when the reply (success or failure) arrives, or when the transport closes
            self.transport.global_request("keepalive@openssh.com", wait=True)
        except (paramiko.SSHException, OSError, EOFError):
            pass
