"""torch.distributed's TCP rendezvous as SGLang's multi-node start-up meets it (``--dist-init-addr HOST:PORT``).

Rank 0's first TP rank hosts the store on PORT and blocks until every rank of the group has joined, at most
``--dist-timeout`` seconds (torch ``TCPStore`` ``waitForWorkers``); a follower's ranks connect to it, retrying
while nothing listens there yet (connection refused), until the same timeout (``SocketConnectOp``). The error
texts are torch's own (``torch/csrc/distributed/c10d/TCPStore.cpp``, ``socket.cpp``), as SGLang logs show them
(sglang#2561, vllm#19670). While waiting, torch logs nothing at its default log level.

After the group is formed the store stays up for the life of rank 0 (a later connection, e.g. gpuhost checking the
port, is read and closed). When rank 0 shuts down it tells the followers (SGLang broadcasts a shutdown request to
every rank), and a follower's process ends with it.

Lab deviation: the store binds the dist-init host, not every interface, because the lab's nodes share one network
namespace on their own 127.x addresses.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable

GO = b"go\n"
SHUTDOWN = b"shutdown\n"


class RendezvousError(Exception):
    """Raised in a scheduler: ``exc_type`` and ``message`` as torch raises them."""

    def __init__(self, exc_type: str, message: str) -> None:
        super().__init__(message)
        self.exc_type, self.message = exc_type, message


def glog(level: str, where: str, message: str) -> str:
    """A c10d log line as torch writes it to stderr: ``[E0616 02:08:15.931416442 socket.cpp:1023] [c10d] ...``."""
    now = time.time_ns()
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now // 1_000_000_000))
    return f"[{level}{stamp}.{now % 1_000_000_000:09d} {where}] [c10d] {message}"


class Store:
    """Rank 0's side: listen on the rendezvous port, count the ranks that join, release them all at once."""

    def __init__(self, host: str, port: int, world: int, own: int, timeout: float) -> None:
        self.world, self.joined, self.timeout = world, own, timeout
        self.members: list[socket.socket] = []
        self._lock = threading.Lock()
        self._formed = threading.Event()
        self.sock = socket.create_server((host, port), reuse_port=False, backlog=64)
        self.sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._hello, args=(conn,), daemon=True).start()

    def _hello(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        try:
            line = conn.makefile("rb").readline()
        except OSError:
            line = b""
        words = line.split()
        if len(words) != 2 or words[0] != b"join" or not words[1].isdigit() or self._formed.is_set():
            conn.close()  # not a rank (a port check), or too late: this group is formed
            return
        conn.settimeout(None)
        with self._lock:
            self.members.append(conn)
            self.joined += int(words[1])
            if self.joined >= self.world:
                self._formed.set()

    def wait(self) -> None:
        """Block until every rank joined; raise torch's ``DistStoreError`` after the timeout."""
        start = time.monotonic()
        while not self._formed.wait(0.01):
            elapsed = int(time.monotonic() - start)
            if elapsed > self.timeout:
                raise RendezvousError(
                    "torch.distributed.DistStoreError",
                    f"Timed out after {elapsed} seconds waiting for clients. {self.joined}/{self.world} clients "
                    "joined.",
                )
        with self._lock:
            for conn in self.members:
                try:
                    conn.sendall(GO)
                except OSError:
                    pass

    def shutdown(self) -> None:
        """Rank 0 is exiting: every follower is told, then the store closes."""
        with self._lock:
            for conn in self.members:
                try:
                    conn.sendall(SHUTDOWN)
                    conn.close()
                except OSError:
                    pass
            self.members = []
        self.sock.close()


class Link:
    """A follower's connection to rank 0's store, kept for the life of the group."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.reader = conn, conn.makefile("rb")

    def watch(self, ended: Callable[[bool], None]) -> threading.Thread:
        """Call ``ended(True)`` when rank 0 announces its shutdown, ``ended(False)`` when its connection is lost."""

        def run() -> None:
            try:
                line = self.reader.readline()
            except OSError:
                line = b""
            ended(line == SHUTDOWN)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread


def join(host: str, port: int, ranks: int, timeout: float, log: Callable[[str], None]) -> Link:
    """A follower's side: connect to rank 0's store (retrying while it does not listen yet), announce this node's
    ranks and wait until the whole group has joined. Raises torch's ``DistNetworkError`` after the timeout, or
    when rank 0 goes away before the group is formed."""
    deadline = time.monotonic() + timeout
    conn: socket.socket | None = None
    while conn is None:
        try:
            conn = socket.create_connection((host, port), timeout=max(0.1, min(5.0, deadline - time.monotonic())))
        except OSError as exc:
            if exc.errno not in (errno.ECONNREFUSED, errno.ECONNRESET) and not isinstance(exc, TimeoutError):
                message = f"The client socket has failed to connect to any network address of ({host}, {port})."
                log(glog("E", "socket.cpp:761", message))
                raise RendezvousError("torch.distributed.DistNetworkError", message) from None
            if time.monotonic() + 0.2 >= deadline:
                message = (
                    f"The client socket has timed out after {int(timeout * 1000)}ms while trying to connect to "
                    f"({host}, {port})."
                )
                log(glog("E", "socket.cpp:1023", message))
                raise RendezvousError("torch.distributed.DistNetworkError", message) from None
            time.sleep(0.2)
    conn.settimeout(None)
    link = Link(conn)
    conn.sendall(f"join {ranks}\n".encode())
    if link.reader.readline() != GO:
        conn.close()
        raise RendezvousError(
            "torch.distributed.DistNetworkError",
            "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
        )
    return link
