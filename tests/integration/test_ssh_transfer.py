"""File transfer, safe writes, timeouts and dead peers over real SSH (sshd in namespaces)."""

import hashlib
import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from gpuhost.connection.ssh import SSHConnection, SSHSettings
from gpuhost.errors import CommandTimeout, ConnectionFailed

pytestmark = pytest.mark.integration

SRC = Path(__file__).resolve().parents[2] / "src"


def settings(host, **kw):
    base = {"address": host.address, "key_file": str(host.client_key), "known_hosts_file": str(host.known_hosts)}
    base.update(kw)
    return SSHSettings(**base)


def temps(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if ".gpuhost-" in p.name) if d.exists() else []


def test_put_get_round_trip_and_no_resend(sshd_host, tmp_path):
    data = os.urandom(8 << 20)
    src = tmp_path / "installer.run"
    src.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    with SSHConnection("node1", settings(sshd_host)) as conn:
        conn.run("mkdir -p /var/cache/gpuhost && head -c 1000 /dev/zero > /var/cache/gpuhost/i.run")  # partial
        r = conn.put_file("/var/cache/gpuhost/i.run", src, mode=0o755, sha256=digest)
        assert r.sent and r.size == len(data)
        assert conn.run("stat -c %a /var/cache/gpuhost/i.run").stdout.strip() == "755"
        again = conn.put_file("/var/cache/gpuhost/i.run", src, mode=0o755, sha256=digest)
        assert (again.sent, again.changed) == (False, False)
        assert conn.get_file("/var/cache/gpuhost/i.run") == data
        assert conn.get_file("/var/cache/gpuhost/i.run", tmp_path / "back").read_bytes() == data
        assert temps(tmp_path) == []
    assert sshd_host.upper("/var/cache/gpuhost/i.run").read_bytes() == data
    assert temps(sshd_host.upper("/var/cache/gpuhost")) == []


_CLIENT = textwrap.dedent("""
    import io, sys, time
    from gpuhost.connection.ssh import SSHConnection, SSHSettings
    class Slow(io.BytesIO):
        def read(self, n=-1):
            time.sleep(0.01)
            return super().read(min(n, 65536) if n and n > 0 else 65536)
    data = b"n" * (64 << 20)
    conn = SSHConnection("n", SSHSettings(address=sys.argv[1], key_file=sys.argv[2], known_hosts_file=sys.argv[3]))
    conn.put_file("/etc/big.conf", Slow(data), sha256="%s")
""")


def test_client_killed_mid_stream_leaves_old_file_and_no_temp(sshd_host):
    with SSHConnection("node1", settings(sshd_host)) as conn:
        conn.run("head -c 100000 /dev/urandom > /etc/big.conf")
        old = conn.get_file("/etc/big.conf")
    digest = hashlib.sha256(b"n" * (64 << 20)).hexdigest()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CLIENT % digest,
            sshd_host.address,
            str(sshd_host.client_key),
            str(sshd_host.known_hosts),
        ],
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    etc = sshd_host.upper("/etc")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        partial = [etc / n for n in temps(etc)]
        if partial and partial[0].stat().st_size > 1 << 20:
            break
        time.sleep(0.02)
    else:
        proc.kill()
        pytest.fail("the upload never started")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while temps(etc) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert temps(etc) == []
    assert (etc / "big.conf").read_bytes() == old


class _DroppingSource(io.RawIOBase):
    """16 MiB that claims to be seekable (so it is streamed, not spooled) and closes the SSH
    session after 4 MiB, while the content is still flowing."""

    def __init__(self, conn):
        self.conn, self.left, self.sent = conn, 16 << 20, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, off, whence=0):
        return self.left if whence == io.SEEK_END else 0

    def tell(self):
        return 0

    def read(self, n=-1):
        if self.sent > 4 << 20:
            self.conn._transport().close()
        chunk = b"z" * min(1 << 20, self.left)
        self.left -= len(chunk)
        self.sent += len(chunk)
        return chunk


def test_channel_closed_early_leaves_old_file(sshd_host):
    conn = SSHConnection("node1", settings(sshd_host))
    conn.run("echo keep-me > /etc/victim")
    digest = hashlib.sha256(b"z" * (16 << 20)).hexdigest()
    with pytest.raises(ConnectionFailed):
        conn.put_file("/etc/victim", _DroppingSource(conn), sha256=digest)
    conn.close()
    deadline = time.monotonic() + 10
    while temps(sshd_host.upper("/etc")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert temps(sshd_host.upper("/etc")) == []
    assert sshd_host.upper("/etc/victim").read_text() == "keep-me\n"


def test_timeout_per_call_and_connection_default(sshd_host):
    with SSHConnection("node1", settings(sshd_host, command_timeout=1.0)) as conn:
        t0 = time.monotonic()
        with pytest.raises(CommandTimeout) as info:
            conn.run("sleep 30")
        assert time.monotonic() - t0 < 5
        assert "sleep 30" in str(info.value) and "1 s" in str(info.value)
        with pytest.raises(CommandTimeout, match="0.5 s"):
            conn.run("sleep 30", timeout=0.5)
        assert conn.run("sleep 30", timeout=0.3, check=False).exit_code == 124
        assert conn.run("sleep 1.5", timeout=5).ok, "a per-call timeout overrides the default"
        assert conn.run("echo still-usable").stdout == "still-usable\n"


def test_frozen_host_ends_a_running_command_with_connection_failed(sshd_host):
    conn = SSHConnection("node1", settings(sshd_host, keepalive=0.5, keepalive_count=2))
    try:
        threading.Timer(0.5, sshd_host.freeze).start()
        t0 = time.monotonic()
        with pytest.raises(ConnectionFailed, match="stopped answering"):
            conn.run("sleep 60")
        elapsed = time.monotonic() - t0
        assert elapsed < 0.5 + 0.5 * 3 + 2, elapsed
        t0 = time.monotonic()
        with pytest.raises(ConnectionFailed):
            conn.run("true")
        assert time.monotonic() - t0 < 2
    finally:
        sshd_host.thaw()
        conn.close()


def test_frozen_host_between_commands(sshd_host):
    conn = SSHConnection("node1", settings(sshd_host, keepalive=0.5, keepalive_count=2))
    try:
        assert conn.run("true").ok
        sshd_host.freeze()
        t0 = time.monotonic()
        with pytest.raises(ConnectionFailed):
            conn.run("true")
        assert time.monotonic() - t0 < 4
    finally:
        sshd_host.thaw()
        conn.close()


def test_new_private_file_is_never_readable_by_others_over_ssh(sshd_host):
    import stat

    etc = sshd_host.upper("/etc")
    seen: set[int] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for p in etc.glob(".token*"):
                try:
                    seen.add(stat.S_IMODE(p.lstat().st_mode))
                except FileNotFoundError:
                    pass

    with SSHConnection("node1", settings(sshd_host)) as conn:
        conn.run("true")
        t = threading.Thread(target=watch)
        t.start()
        try:
            r = conn.put_file("/etc/token", os.urandom(1 << 20) * 32, mode=0o600)
        finally:
            stop.set()
            t.join()
        assert r.sent and conn.run("stat -c %a /etc/token").stdout.strip() == "600"
        first = conn.write_file("/etc/token", "a\n")
        second = conn.write_file("/etc/token", "b\n")
        assert first.backup != second.backup and conn.read_file(second.backup) == "a\n"
    assert seen, "the watcher saw the temporary file"
    assert all(m & 0o077 == 0 for m in seen), sorted(oct(m) for m in seen)
