"""A server that hangs up in the middle of the SSH handshake is a connection failure the run reports, not a crash:
paramiko raises EOFError from ``connect`` when the peer sends its banner and then closes (``Transport.run`` keeps
the EOFError and ``start_client`` raises it)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost.connection.settings import SSHSettings
from gpuhost.connection.ssh import SSHConnection
from gpuhost.errors import ConnectionFailed


@pytest.fixture
def hangs_up_after_its_banner() -> Iterator[int]:
    """A TCP server on loopback that says it is OpenSSH, takes the client's banner and key exchange offer, and hangs
    up (its side first, so the client reads the end of the stream rather than a reset)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            client.settimeout(5)
            try:
                client.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")
                seen = b""
                while b"\n" not in seen or len(seen) < 200:  # the client's banner, then its KEXINIT packet
                    data = client.recv(4096)
                    if not data:
                        break
                    seen += data
                client.shutdown(socket.SHUT_WR)
                while client.recv(4096):
                    pass
            except OSError:
                pass
            finally:
                client.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_a_server_that_hangs_up_mid_handshake_is_a_connection_failure(
    hangs_up_after_its_banner: int, tmp_path: Path
) -> None:
    settings = SSHSettings(
        address="127.0.0.1", port=hangs_up_after_its_banner, known_hosts_file=str(tmp_path / "kh"), connect_timeout=5
    )
    with pytest.raises(ConnectionFailed) as err:
        SSHConnection("pve1", settings)
    assert "pve1" in str(err.value)
    assert "closed the connection during the handshake" in str(err.value)


def test_the_keeper_lets_go_of_a_connection_whose_opening_raised_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuhost.connection import persist, ssh

    class HungUp:
        def __init__(self, *_: object) -> None:
            raise EOFError  # what paramiko raised through SSHConnection before it said ConnectionFailed

    monkeypatch.setattr(ssh, "SSHConnection", HungUp)
    keeper = persist.Keeper()
    kept = persist._Kept("pve1", SSHSettings(address="192.0.2.10"), 60)
    keeper.kept["x" * 32] = kept
    kept.open()
    assert kept.conn is None
    assert keeper.expire() is False  # nothing held: the keeper leaves instead of waiting for it forever
