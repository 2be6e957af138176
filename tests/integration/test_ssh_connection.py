import socket
import subprocess
import time

import pytest

from gpuhost.connection.ssh import SSHConnection, SSHSettings
from gpuhost.errors import ConnectionFailed, HostKeyMismatch

pytestmark = pytest.mark.integration


def settings(host, **kw):
    base = dict(address=host.address, key_file=str(host.client_key), known_hosts_file=str(host.known_hosts))
    base.update(kw)
    return SSHSettings(**base)


def test_runs_commands_with_separate_streams_and_exit_codes(sshd_host):
    with SSHConnection("node1", settings(sshd_host)) as conn:
        r = conn.run("hostname; echo to-err >&2; exit 3", check=False)
        assert (r.stdout, r.stderr, r.exit_code) == ("node1\n", "to-err\n", 3)
        big = conn.run("head -c 3000000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero | tr '\\0' b >&2")
        assert len(big.stdout) == 3_000_000 and len(big.stderr) == 300_000
        assert conn.run("cat", input=b"through stdin").stdout == "through stdin"


def test_tcp_nodelay_is_set(sshd_host):
    with SSHConnection("node1", settings(sshd_host)) as conn:
        sock = conn._transport().sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_atomic_write_over_ssh_keeps_owner_mode_and_backup(sshd_host):
    with SSHConnection("node1", settings(sshd_host)) as conn:
        conn.run("printf 'old\\n' > /etc/gh-test && chown 1:2 /etc/gh-test && chmod 640 /etc/gh-test")
        result = conn.write_file("/etc/gh-test", "new\n")
        assert conn.run("stat -c '%u:%g %a' /etc/gh-test").stdout.strip() == "1:2 640"
        assert conn.read_file("/etc/gh-test") == "new\n"
        assert conn.read_file(result.backup) == "old\n"
    assert sshd_host.upper("/etc/gh-test").read_text() == "new\n"


def test_unknown_host_key_is_refused_by_default(sshd_host, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(ConnectionFailed, match="not in .*known_hosts.*accept-new"):
        SSHConnection("node1", settings(sshd_host, known_hosts_file=str(empty)))


def test_host_key_mismatch_is_refused(sshd_host, tmp_path):
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    fake = tmp_path / "known_hosts"
    fake.write_text(
        f"{sshd_host.address} {(tmp_path / 'other.pub').read_text().split()[0]} "
        f"{(tmp_path / 'other.pub').read_text().split()[1]}\n"
    )
    with pytest.raises(HostKeyMismatch) as info:
        SSHConnection("node1", settings(sshd_host, known_hosts_file=str(fake)))
    assert "host key mismatch" in str(info.value) and "ssh-keygen" in str(info.value)
    # accept-new never overrides a mismatch
    with pytest.raises(HostKeyMismatch):
        SSHConnection("node1", settings(sshd_host, known_hosts_file=str(fake), host_key_policy="accept-new"))


def test_accept_new_records_the_key_then_verifies_it(sshd_host, tmp_path):
    kh = tmp_path / "kh"
    with SSHConnection("node1", settings(sshd_host, known_hosts_file=str(kh), host_key_policy="accept-new")):
        pass
    assert sshd_host.host_key_pub in kh.read_text()
    with SSHConnection("node1", settings(sshd_host, known_hosts_file=str(kh))) as conn:
        assert conn.run("true").ok


def test_unreachable_host_is_a_clear_error():
    with pytest.raises(ConnectionFailed, match="127.0.9.254:22"):
        SSHConnection("ghost", SSHSettings(address="127.0.9.254", connect_timeout=2))


def test_reconnect_after_the_server_restarts(sshd_host):
    conn = SSHConnection("node1", settings(sshd_host))
    sshd_host.stop()
    with pytest.raises(ConnectionFailed):
        conn.run("true")
    sshd_host.start()
    t0 = time.monotonic()
    conn.reconnect(timeout=10)
    assert conn.run("hostname").stdout.strip() == "node1"
    assert time.monotonic() - t0 < 10
    conn.close()
