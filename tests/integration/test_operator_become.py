"""``ssh.become``: a non-root SSH user with passwordless sudo provisions as root; without sudo rights
the connection says so and how to fix it."""

import shutil
import subprocess

import pytest

from tests.integration.test_operator_output import gpuhost

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("sudo") is None, reason="sudo is not installed on this machine (apt-get install sudo)"
    ),
]


def as_root(host, command: str) -> None:
    subprocess.run(
        [
            "ssh",
            "-i",
            str(host.client_key),
            "-o",
            f"UserKnownHostsFile={host.known_hosts}",
            "-o",
            "BatchMode=yes",
            f"root@{host.address}",
            command,
        ],
        check=True,
        capture_output=True,
    )


def inventory(tmp_path, host, user: str, become: bool):
    inv = tmp_path / f"inv-{user}.yml"
    inv.write_text(
        f"nodes:\n  n:\n    address: {host.address}\n    ssh:\n      user: {user}\n"
        f"      key_file: {host.client_key}\n      known_hosts_file: {host.known_hosts}\n"
        f"      become: {'true' if become else 'false'}\n"
    )
    return inv


def test_become_runs_as_root_through_sudo(sshd_host, tmp_path):
    for user, sudo in (("ops", True), ("guest", False)):
        as_root(
            sshd_host,
            f"useradd -m -s /bin/sh {user} && mkdir -p /home/{user}/.ssh && "
            f"cp /root/.ssh/authorized_keys /home/{user}/.ssh/ && chown -R {user} /home/{user}/.ssh"
            + (
                f" && echo '{user} ALL=(root) NOPASSWD: ALL' > /etc/sudoers.d/{user} && chmod 440 /etc/sudoers.d/{user}"
                if sudo
                else ""
            ),
        )
    r = gpuhost("shell", "n", "-i", str(inventory(tmp_path, sshd_host, "ops", False)), "--", "id -un")
    assert r.returncode == 0 and "  ops" in r.stdout.splitlines(), r.stdout + r.stderr
    inv = inventory(tmp_path, sshd_host, "ops", True)
    r = gpuhost("shell", "n", "-i", str(inv), "--", "id -un; cat /etc/shadow >/dev/null && echo can-read-shadow")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[1:3] == ["  root", "  can-read-shadow"]
    book = tmp_path / "motd.yml"
    book.write_text("- hosts: all\n  tasks:\n    - line: {path: /etc/motd, line: managed-as-root, create: true}\n")
    r = gpuhost("run", str(book), "-i", str(inv))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "managed-as-root" in sshd_host.upper("/etc/motd").read_text()
    r = gpuhost("shell", "n", "-i", str(inventory(tmp_path, sshd_host, "guest", True)), "--", "id -un")
    assert r.returncode == 1
    assert "become: guest cannot run commands as root with sudo -n" in r.stdout and "NOPASSWD" in r.stdout
