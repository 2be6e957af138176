"""SSH as datacenters use it, against real sshd hosts: ~/.ssh/config (HostName, User, Port, IdentityFile,
ProxyJump, ProxyCommand), an inventory jump host (per node and from a group's ssh_defaults), IPv6."""

import socket
import subprocess

import pytest

from tests.integration.test_operator_output import gpuhost
from tests.support.sshd_host import make_host, remove

pytestmark = pytest.mark.integration


@pytest.fixture
def pair(sshd_host):
    """node1 (the target) and node2 (the bastion); known_hosts trusts both."""
    bastion = make_host("node2", sshd_host.address.rsplit(".", 1)[0] + ".241").start()
    known = sshd_host.base / "known_all"
    known.write_text(sshd_host.known_hosts.read_text() + bastion.known_hosts.read_text())
    yield sshd_host, bastion, known
    remove(bastion)


def accepted(host) -> int:
    log = host.upper("/var/log/sshd-test.log")
    return log.read_text().count("Accepted publickey") if log.exists() else 0


def test_ssh_config_alias_with_proxyjump_through_a_second_node(pair, tmp_path):
    target, bastion, known = pair
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host bastion\n  HostName {bastion.address}\n  User root\n  IdentityFile {bastion.client_key}\n\n"
        f"Host gpu-a\n  HostName {target.address}\n  User root\n  Port 22\n"
        f"  IdentityFile {target.client_key}\n  ProxyJump bastion\n"
    )
    inv = tmp_path / "inv.yml"
    inv.write_text(
        f"nodes:\n  a:\n    address: gpu-a\n    ssh:\n      config_file: {config}\n      known_hosts_file: {known}\n"
    )
    before = accepted(bastion)
    r = gpuhost("shell", "a", "-i", str(inv), "--", "hostname")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  node1" in r.stdout.splitlines()
    assert accepted(bastion) == before + 1, "the session did not go through the jump host"


def test_ssh_config_proxycommand(pair, tmp_path):
    target, bastion, known = pair
    trace = tmp_path / "proxy-used"
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host gpu-b\n"
        f"  HostName {target.address}\n  IdentityFile {target.client_key}\n"
        f"  ProxyCommand sh -c 'touch {trace}; exec ssh -q -i {bastion.client_key} -o BatchMode=yes "
        f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes -W %h:%p root@{bastion.address}'\n"
    )
    inv = tmp_path / "inv.yml"
    inv.write_text(
        f"nodes:\n  b:\n    address: gpu-b\n    ssh:\n      config_file: {config}\n      known_hosts_file: {known}\n"
    )
    r = gpuhost("shell", "b", "-i", str(inv), "--", "hostname")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  node1" in r.stdout.splitlines() and trace.exists()
    assert "Traceback" not in r.stderr


def test_inventory_jump_host_from_group_ssh_defaults(pair, tmp_path):
    target, bastion, known = pair
    inv = tmp_path / "inv.yml"
    inv.write_text(
        f"nodes:\n  a:\n    address: {target.address}\n    ssh:\n      key_file: {target.client_key}\n"
        f"      known_hosts_file: {known}\n"
        "groups:\n  behind_bastion:\n    nodes: [a]\n    ssh_defaults:\n"
        f"      jump: {{address: {bastion.address}, key_file: {bastion.client_key}}}\n"
    )
    before = accepted(bastion)
    r = gpuhost("shell", "a", "-i", str(inv), "--", "hostname")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  node1" in r.stdout.splitlines() and accepted(bastion) == before + 1
    bastion.stop()
    r = gpuhost("shell", "a", "-i", str(inv), "--", "hostname")
    assert r.returncode == 1 and f"jump host {bastion.address}" in r.stdout


def test_unknown_alias_without_config_names_the_host(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("nodes:\n  a:\n    address: no-such-alias.invalid\n    ssh:\n      config_file: none\n")
    r = gpuhost("shell", "a", "-i", str(inv), "--", "true")
    assert r.returncode == 1 and "a | UNREACHABLE | " in r.stdout and "no-such-alias.invalid:22" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
def test_ipv6_address(tmp_path):
    host = make_host("node6", "::1").start()
    try:
        inv = tmp_path / "inv.yml"
        inv.write_text(
            f"nodes:\n  six:\n    address: '::1'\n    ssh:\n      key_file: {host.client_key}\n"
            f"      known_hosts_file: {host.known_hosts}\n"
        )
        r = gpuhost("shell", "six", "-i", str(inv), "--", "hostname")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "  node6" in r.stdout.splitlines()
    finally:
        remove(host)


def test_no_key_to_offer_names_what_was_tried_and_the_three_fixes(sshd_host, tmp_path):
    # the trap: paramiko's bare "No authentication methods available" with nothing to act on
    inv = tmp_path / "inv.yml"
    inv.write_text(
        f"nodes:\n  a:\n    address: {sshd_host.address}\n    ssh:\n      config_file: none\n      use_agent: false\n"
        f"      known_hosts_file: {sshd_host.known_hosts}\n"
    )
    r = gpuhost("shell", "a", "-i", str(inv), "--", "true", env={"HOME": str(tmp_path)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        "No authentication methods available: logging in as root: no key file was found to try; ssh-agent not "
        "used (ssh.use_agent: false). Fix: name the key in the inventory (ssh.key_file), load it into ssh-agent "
        "(ssh-add KEY), or give the host an IdentityFile in ~/.ssh/config"
    ) in " ".join(r.stdout.split())


def test_a_refused_key_is_named(sshd_host, tmp_path):
    wrong = tmp_path / "wrong_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong)], check=True)
    inv = tmp_path / "inv.yml"
    inv.write_text(
        f"nodes:\n  a:\n    address: {sshd_host.address}\n    ssh:\n      config_file: none\n      use_agent: false\n"
        f"      key_file: {wrong}\n      known_hosts_file: {sshd_host.known_hosts}\n"
    )
    r = gpuhost("shell", "a", "-i", str(inv), "--", "true", env={"HOME": str(tmp_path)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"Authentication failed: logging in as root: key files tried: {wrong};" in " ".join(r.stdout.split())
