"""A command that runs past its timeout is stopped on the host, with what it started (issue 31, item 7).

Before, the channel was closed and the command ran on: its file appeared seconds after the task had failed.
"""

from __future__ import annotations

import time

import pytest

from gpuhost.connection.ssh import SSHConnection, SSHSettings

pytestmark = pytest.mark.integration


def settings(host, **kw):
    base = dict(address=host.address, key_file=str(host.client_key), known_hosts_file=str(host.known_hosts))
    base.update(kw)
    return SSHSettings(**base)


def test_timed_out_command_and_its_children_are_killed(sshd_host):
    with SSHConnection("node1", settings(sshd_host)) as conn:
        conn.run("rm -f /root/gh-orphan-a /root/gh-orphan-b")
        started = time.monotonic()
        r = conn.run(
            "(sleep 3.17; touch /root/gh-orphan-b) & sleep 3.17; touch /root/gh-orphan-a", check=False, timeout=1
        )
        assert r.timed_out and r.exit_code == 124
        assert time.monotonic() - started < 3
        assert not r.stderr.startswith("gpuhost-sid"), r.stderr
        time.sleep(3.5)
        left = conn.run(
            "ls /root/gh-orphan-a /root/gh-orphan-b 2>/dev/null; pgrep -f '^sleep 3[.]17$' || true", check=False
        )
        assert left.stdout == "", left.stdout


def test_output_of_a_normal_command_is_untouched(sshd_host):
    with SSHConnection("node1", settings(sshd_host)) as conn:
        r = conn.run("echo out; echo err >&2; exit 4", check=False)
        assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 4)
        assert conn.run("true").stderr == ""


def test_a_command_killed_by_a_signal_is_a_failed_command_not_a_lost_host(sshd_host):
    with SSHConnection("node1", settings(sshd_host)) as conn:
        r = conn.run("kill -KILL $$", check=False)
        assert r.exit_code == 137 and "killed by a signal" in r.stderr
        assert conn.run("echo still here").stdout == "still here\n"


CA_LINE = (
    "@cert-authority *.example.invalid ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
)


def test_known_hosts_with_marker_lines_still_connects(sshd_host, tmp_path):
    """``@cert-authority`` and ``@revoked`` lines (sshd(8) SSH_KNOWN_HOSTS FILE FORMAT) used to make gpuhost crash
    (exit 70): paramiko's loader reads the marker as a host name."""
    kh = tmp_path / "known_hosts"
    other = "@revoked * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    kh.write_text(f"{CA_LINE}\n{other}\n" + sshd_host.known_hosts.read_text())
    with SSHConnection("node1", settings(sshd_host, known_hosts_file=str(kh))) as conn:
        assert conn.run("echo ok").stdout == "ok\n"


def test_a_revoked_host_key_is_refused(sshd_host, tmp_path):
    from gpuhost.errors import HostKeyMismatch

    line = sshd_host.known_hosts.read_text().splitlines()[0]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{line}\n@revoked {line}\n")
    with pytest.raises(HostKeyMismatch, match="@revoked"):
        SSHConnection("node1", settings(sshd_host, known_hosts_file=str(kh))).run("true")
