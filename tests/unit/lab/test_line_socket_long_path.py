"""A lab whose state directory is deeper than a Unix socket path may be (107 bytes) still starts and answers."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from gpuhost.lab.node.line_socket import exchange, reachable


def test_a_socket_deeper_than_sun_path_is_bound_and_reached(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = str(deep / "supervisor.sock")
    assert len(path) > 107
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as plain:  # what the supervisor hit before
        try:
            plain.bind(path)
        except OSError as exc:
            assert "too long" in str(exc)
        else:
            raise AssertionError("the kernel took a path longer than sun_path")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with reachable(path) as where:
        server.bind(where)
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            line = conn.makefile().readline().strip()
            conn.sendall(f"got {line}\n".encode())

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        assert Path(path).is_socket()  # the socket is where it was asked for, not under /proc
        assert exchange(path, "status", timeout=5) == "got status"
    finally:
        thread.join(timeout=5)
        server.close()


def test_a_short_path_is_used_as_it_is(tmp_path: Path) -> None:
    with reachable("/run/gpuhost-lab/supervisor.sock") as where:
        assert where == "/run/gpuhost-lab/supervisor.sock"
