"""The supervisor's line protocol over a Unix socket, the client's half: one request line out, the reply read
until the supervisor closes. Used by the host's lab commands (:mod:`gpuhost.lab.control`) and by a node's cluster
tools (:mod:`gpuhost.lab.node.cli.cluster_link`); standard library only (it runs inside the nodes)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

#: sun_path holds 108 bytes with its terminating NUL (unix(7))
_SUN_PATH_MAX = 107


@contextmanager
def reachable(path: str) -> Iterator[str]:
    """``path`` in a form ``bind`` and ``connect`` take. A Unix socket's path is at most 107 bytes (unix(7)), and a
    lab's state directory may be deeper than that (a test's temporary directory is): a longer path is reached
    through a descriptor of its directory, ``/proc/self/fd/N/NAME``."""
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        yield path
        return
    directory, name = os.path.split(path)
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def exchange(socket_path: str, line: str, timeout: float = 30.0) -> str:
    """Send ``line``; the stripped reply. Socket errors (``OSError``) are the caller's to word."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        with reachable(socket_path) as path:
            sock.connect(path)
        sock.sendall(line.encode() + b"\n")
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode().strip()
