"""The keeper's kept shell (connection/read_shell.py), against a real sshd: each read as if run as a command of its
own, and a shell that cannot vouch for the next read (it ended, something still writes, a read ran out of time) is
closed, never read over again."""

from __future__ import annotations

import time

import pytest

from gpuhost.connection.read_shell import ReadShell
from gpuhost.connection.ssh import SSHConnection, SSHSettings

pytestmark = pytest.mark.integration


def settings(host) -> SSHSettings:
    return SSHSettings(address=host.address, key_file=str(host.client_key), known_hosts_file=str(host.known_hosts))


COMMANDS = [
    "echo out; echo err >&2; exit 4",
    "printf 'no newline'",
    "printf 'a\\n\\n\\n'; printf 'b\\n\\n' >&2",
    "cd /; x=1; exit 0",  # a subshell's cd, variable and exit end with it
    'pwd; echo "x=${x-unset}"',
    "cat",  # reads nothing: its input is /dev/null, not the shell's
    "printf 'caf\\303\\251 \\377\\000z\\n'",
    "kill -TERM $$",  # $$ is the shell's: it ends, and says nothing more
]


def test_each_read_in_the_kept_shell_is_what_it_gives_run_alone(sshd_host) -> None:
    with SSHConnection("node1", settings(sshd_host)) as conn:
        shell = ReadShell(conn)
        for command in COMMANDS[:-1]:
            alone = conn.run(command, check=False)
            got = shell.run(command, 30)
            assert got is not None, command
            assert (got[0], got[1].decode(errors="replace"), got[2]) == (alone.exit_code, alone.stdout, alone.stderr)
        bad = shell.run("it's not closed", 30)  # a syntax error is the read's own, as with sh -c (same status)
        assert bad is not None and bad[0] == conn.run("it's not closed", check=False).exit_code == 2
        assert "unexpected EOF" in bad[2]
        assert shell.run("echo after", 30) == (0, b"after\n", "")
        assert shell.session is not None
        assert shell.run(COMMANDS[-1], 30) is None
        assert shell.ended and shell.run("true", 30) is None


def test_output_left_behind_by_a_read_closes_the_shell_before_the_next(sshd_host) -> None:
    with SSHConnection("node1", settings(sshd_host)) as conn:
        shell = ReadShell(conn)
        got = shell.run("(sleep 0.5; echo late) &", 30)
        assert got is not None and got[0] == 0
        time.sleep(1)
        assert shell.run("echo next", 30) is None  # "late" came outside any frame
        assert shell.ended


def test_a_read_past_its_timeout_is_killed_on_the_node_with_the_shell(sshd_host) -> None:
    with SSHConnection("node1", settings(sshd_host)) as conn:
        conn.run("rm -f /root/gh-shell-late")
        shell = ReadShell(conn)
        started = time.monotonic()
        got = shell.run("sleep 2.71; touch /root/gh-shell-late", 0.5)
        assert got is not None and got[0] == 124 and "timed out" in got[2]
        assert time.monotonic() - started < 2
        assert shell.ended
        time.sleep(3)
        left = conn.run("ls /root/gh-shell-late 2>/dev/null; pgrep -f '^sleep 2[.]71$' || true", check=False)
        assert left.stdout == ""


def test_with_become_the_shell_is_roots_through_sudo(sshd_host) -> None:
    from dataclasses import replace

    with SSHConnection("node1", settings(sshd_host)) as conn:
        if conn.run("command -v sudo", check=False).exit_code != 0:
            pytest.skip("no sudo on this sshd host")
    with SSHConnection("node1", replace(settings(sshd_host), become=True)) as conn:
        shell = ReadShell(conn)
        got = shell.run("id -u", 30)
        assert got is not None and got[:2] == (0, b"0\n")
