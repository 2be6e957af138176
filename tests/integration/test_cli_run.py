"""``gpuhost run`` end to end against a real sshd host, as a user would run it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.integration.conftest import write_inventory

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "playbooks" / "example.yml"
SCHEMA = json.loads((REPO / "docs" / "schema" / "run-report.schema.json").read_text())
WATCHED = ["/etc/modules", "/etc/modprobe.d/gpuhost-nouveau.conf", "/etc/motd"]


def gpuhost(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=120,
    )


def checksums(host) -> dict[str, str]:
    out = {}
    for path in WATCHED:
        r = subprocess.run(
            [
                "ssh",
                "-i",
                str(host.client_key),
                "-o",
                f"UserKnownHostsFile={host.known_hosts}",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "BatchMode=yes",
                f"root@{host.address}",
                f"sha256sum {path} 2>/dev/null || echo missing",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        out[path] = r.stdout.split()[0]
    return out


@pytest.fixture
def node(sshd_host, tmp_path):
    """The test host with a stand-in update-initramfs that records each call, and
    /etc/modprobe.d as every PVE host has it (this machine image lacks kmod's directory)."""
    subprocess.run(
        [
            "ssh",
            "-i",
            str(sshd_host.client_key),
            "-o",
            f"UserKnownHostsFile={sshd_host.known_hosts}",
            f"root@{sshd_host.address}",
            "printf '#!/bin/sh\\necho \"$@\" >> /var/log/initramfs-calls\\n' > /usr/local/sbin/update-initramfs"
            " && chmod 755 /usr/local/sbin/update-initramfs && mkdir -p /etc/modprobe.d",
        ],
        check=True,
    )
    inventory = write_inventory(tmp_path / "inventory.yml", [sshd_host])
    return sshd_host, inventory


def test_first_run_changes_second_run_changes_nothing(node):
    host, inventory = node
    first = gpuhost("run", str(EXAMPLE), "-i", str(inventory))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "changed" in first.stdout and "handler: update initramfs" in first.stdout
    assert host.upper("/etc/modules").read_text().endswith("vfio\nvfio_iommu_type1\nvfio_pci\n")
    assert "blacklist nouveau" in host.upper("/etc/modprobe.d/gpuhost-nouveau.conf").read_text()
    assert not host.upper("/etc/modprobe.d/gpuhost-vfio.conf").exists(), "the example binds no GPU to vfio-pci"
    assert host.upper("/var/log/initramfs-calls").read_text() == "-u -k all\n"

    second = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "--json")
    assert second.returncode == 0
    report = json.loads(second.stdout)
    assert report["hosts"]["node1"]["changed"] == 0
    assert report["hosts"]["node1"]["ok"] == 3
    assert host.upper("/var/log/initramfs-calls").read_text() == "-u -k all\n", "handler ran again"


def test_check_diff_shows_changes_and_writes_nothing(node):
    host, inventory = node
    before = checksums(host)
    r = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "--check", "--diff")
    assert r.returncode == 0, r.stderr
    assert "+vfio_pci" in r.stdout
    assert "+blacklist nouveau" in r.stdout and "vfio-pci ids=" not in r.stdout
    assert "would change" in r.stdout and "check mode" in r.stdout
    assert checksums(host) == before
    assert not host.upper("/var/log/initramfs-calls").exists(), "a handler ran in check mode"


def test_json_report_follows_its_documented_schema(node):
    host, inventory = node
    for extra in ([], ["--check"]):
        r = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "--json", *extra)
        report = json.loads(r.stdout)
        jsonschema.validate(report, SCHEMA)
        assert report["exit_code"] == r.returncode == 0
    failing = host.base / "fail.yml"
    failing.write_text("- hosts: all\n  tasks:\n    - command: {cmd: 'echo boom >&2; exit 4'}\n")
    r = gpuhost("run", str(failing), "-i", str(inventory), "--json")
    report = json.loads(r.stdout)
    jsonschema.validate(report, SCHEMA)
    assert r.returncode == 1 and report["ok"] is False
    assert "exit 4" in report["tasks"][0]["error"] and "boom" in report["tasks"][0]["error"]


def test_planted_secret_never_appears_in_any_output(node, tmp_path):
    host, inventory = node
    token = "pve-token-7f3e9c1a-51d2-4b8e-a0c4-2d9b7e6f1a3c"
    book = tmp_path / "secret.yml"
    book.write_text(
        "- hosts: all\n  tasks:\n"
        "    - copy: {dest: /etc/gh-token, content: \"{{ secret_env('GH_TEST_TOKEN') }}\\n\", mode: '0600'}\n"
        "    - command: {cmd: \"echo using {{ secret_env('GH_TEST_TOKEN') }}; exit 3\"}\n"
    )
    env = {"GH_TEST_TOKEN": token}
    outputs = []
    for extra in ([], ["--diff"], ["--json"], ["--check", "--diff"], ["--json", "--check"]):
        r = gpuhost("run", str(book), "-i", str(inventory), *extra, env=env)
        outputs.append(r.stdout + r.stderr)
    assert host.upper("/etc/gh-token").read_text() == token + "\n", "the real value reaches the host"
    for out in outputs:
        assert token not in out
        assert "7f3e9c1a" not in out
    assert any("********" in o for o in outputs)


def test_bad_inventory_exits_2_naming_field_and_line(tmp_path):
    bad = tmp_path / "inventory.yml"
    bad.write_text("nodes:\n  pve1:\n    address: 127.0.9.1\n    ssh:\n      host_key_polcy: strict\n")
    r = gpuhost("run", str(EXAMPLE), "-i", str(bad))
    assert r.returncode == 2
    assert f"{bad}:5: field 'nodes.pve1.ssh.host_key_polcy': unknown field" in r.stderr
    assert r.stdout == ""


def test_host_key_mismatch_is_refused_with_a_clear_message(node, tmp_path):
    host, inventory = node
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    pub = (tmp_path / "other.pub").read_text().split()
    host.known_hosts.write_text(f"{host.address} {pub[0]} {pub[1]}\n")
    r = gpuhost("run", str(EXAMPLE), "-i", str(inventory))
    assert r.returncode == 1
    assert "host key mismatch" in r.stdout and "unreachable" in r.stdout
    assert not host.upper("/etc/modprobe.d/gpuhost-nouveau.conf").exists()


def test_facts_command(node):
    host, inventory = node
    r = gpuhost("facts", "node1", "-i", str(inventory), "--json")
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)["facts"]
    assert facts["hostname"] == "node1"
    assert facts["os"].startswith("Debian GNU/Linux 12")
