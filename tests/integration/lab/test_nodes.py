"""Each lab node looks like a PVE node to anyone who logs in over SSH."""

from __future__ import annotations

import subprocess
from pathlib import Path

import paramiko
import pytest
from ruamel.yaml import YAML

import gpuhost
from tests.lab_fixtures import LabHandle


def test_every_node_is_a_distinct_pve_node(lab: LabHandle) -> None:
    seen = set()
    for node in lab.nodes:
        r = lab.run(
            node.name,
            "hostname; pveversion; cat /etc/hostname; ls /etc/pve/nodes; "
            "readlink /etc/pve/qemu-server; test -f /etc/pve/qemu-server/100.conf && echo vm100",
        )
        lines = r.stdout.splitlines()
        assert r.rc == 0, r.stderr
        assert lines[0] == node.name and lines[2] == node.name and lines[3] == node.name
        assert lines[1].startswith(f"pve-manager/{node.pve}.")
        assert lines[4] == f"nodes/{node.name}/qemu-server"
        assert lines[5] == "vm100"
        seen.add(lines[0])
    assert seen == {"pve1", "pve2", "pve3"}


def test_pveversion_verbose_names_the_running_kernel(lab: LabHandle) -> None:
    out = lab.run("pve3", "pveversion -v").stdout.splitlines()
    assert out[0] == "proxmox-ve: 9.0.0 (running kernel: 6.14.8-2-pve)"
    assert out[1].startswith("pve-manager: 9.0.3 (running version: 9.0.3/")
    assert any(line.startswith("qemu-server: 9.") for line in out)


def test_boot_files_match_the_bootloader(lab: LabHandle) -> None:
    sd = lab.run(
        "pve1",
        "cat /proc/cmdline; cat /etc/kernel/cmdline; cat /etc/kernel/proxmox-boot-uuids; "
        "grep ^GRUB_CMDLINE_LINUX_DEFAULT /etc/default/grub",
    ).stdout.splitlines()
    assert sd[0].startswith("initrd=\\EFI\\proxmox\\6.8.12-4-pve\\initrd.img-6.8.12-4-pve ")
    assert sd[0].endswith("root=ZFS=rpool/ROOT/pve-1 boot=zfs")
    assert sd[1] == "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
    assert sd[3].count("-") == 1 and len(sd[3]) == 9  # an ESP UUID like 3FB6-0A4D
    grub = lab.run(
        "pve2",
        "cat /proc/cmdline; test -e /etc/kernel/cmdline || echo no-kernel-cmdline; "
        "test -e /etc/kernel/proxmox-boot-uuids || echo no-esp-list",
    ).stdout.splitlines()
    assert grub == [
        "BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet",
        "no-kernel-cmdline",
        "no-esp-list",
    ]


def test_clean_root_home_modules_and_modprobe(lab: LabHandle) -> None:
    r = lab.run("pve1", "ls -A /root; grep -c . /etc/modules; ls /etc/modprobe.d; echo $PATH")
    lines = r.stdout.splitlines()
    assert lines[:3] == [".bashrc", ".profile", ".ssh"]
    assert "pve-blacklist.conf" in lines
    assert "/usr/sbin" in lines[-1]


def test_node_cannot_see_the_lab_state_or_the_checkout(lab: LabHandle) -> None:
    checkout = Path(gpuhost.__file__).resolve().parents[2]
    r = lab.run(
        "pve1", f"for d in {lab.state_dir} {lab.state_dir.parent} {checkout}; do ls -A $d 2>/dev/null; done | wc -l"
    )
    assert r.stdout.strip() == "0"


def test_strict_host_key_checking_accepts_lab_keys_and_rejects_others(lab: LabHandle, tmp_path) -> None:
    lab.connect("pve2").close()
    wrong = tmp_path / "known_hosts"
    other = lab.known_hosts.read_text().splitlines()
    # pve2's address with pve1's key: a host presenting another key must be refused
    wrong.write_text(f"{lab.node('pve2').address} {' '.join(other[0].split()[1:])}\n")
    client = paramiko.SSHClient()
    client.load_host_keys(str(wrong))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException):
        client.connect(
            lab.node("pve2").address,
            username="root",
            key_filename=str(lab.client_key),
            look_for_keys=False,
            allow_agent=False,
            timeout=5,
        )
    client.close()


def test_openssh_client_with_the_written_known_hosts(lab: LabHandle) -> None:
    r = subprocess.run(
        [
            "ssh",
            "-i",
            str(lab.client_key),
            "-o",
            f"UserKnownHostsFile={lab.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "KexAlgorithms=curve25519-sha256",
            f"root@{lab.node('pve3').address}",
            "hostname",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (r.returncode, r.stdout.strip()) == (0, "pve3"), r.stderr


def test_inventory_follows_the_schema(lab: LabHandle) -> None:
    text = lab.inventory.read_text()
    assert text.startswith("# written by `gpuhost lab up` — do not edit\n")
    inv = YAML(typ="safe").load(text)
    assert set(inv) == {"vars", "nodes", "groups"}
    assert inv["groups"]["lab"]["nodes"] == ["pve1", "pve2", "pve3"]
    for node in lab.nodes:
        entry = inv["nodes"][node.name]
        assert entry["address"] == node.address
        assert entry["ssh"] == {
            "user": "root",
            "port": 22,
            "key_file": "client_key",
            "known_hosts_file": "known_hosts",
            "host_key_policy": "strict",
        }
        assert entry["api"]["url"] == f"https://{node.address}:8006"
        assert entry["api"]["token_id"] == "root@pam!gpuhost"
        assert entry["vars"]["lab"] is True
        secret = lab.inventory.parent / entry["api"]["token_secret_file"]
        assert (secret.stat().st_mode & 0o777) == 0o600
        assert (lab.inventory.parent / entry["api"]["ca_file"]).exists()
    assert (lab.client_key.stat().st_mode & 0o777) == 0o600


def test_kernel_release_is_the_nodes_not_the_hosts(lab: LabHandle) -> None:
    r = lab.run("pve3", "uname -r; uname -sr; cat /proc/version; pveversion")
    lines = r.stdout.splitlines()
    assert lines[:2] == ["6.14.8-2-pve", "Linux 6.14.8-2-pve"]
    assert lines[2].startswith("Linux version 6.14.8-2-pve ")
    assert lines[3].endswith("(running kernel: 6.14.8-2-pve)")


def test_cpu_vendor_and_kernel_log_follow_the_node_spec(lab: LabHandle) -> None:
    amd = lab.run(
        "pve1", "grep -m1 vendor_id /proc/cpuinfo; grep -c svm /proc/cpuinfo; dmesg | grep -E 'iommu:|AMD-Vi'"
    )
    assert amd.stdout.startswith("vendor_id\t: AuthenticAMD\n")
    assert (
        "iommu: Default domain type: Translated" in amd.stdout and "AMD-Vi: Interrupt remapping enabled" in amd.stdout
    )
    intel = lab.run("pve2", "grep -m1 'model name' /proc/cpuinfo; dmesg | grep -E 'DMAR|iommu:'")
    assert "INTEL(R) XEON(R) PLATINUM 8592+" in intel.stdout and "DMAR: IOMMU enabled" in intel.stdout
    assert "AMD-Vi" not in intel.stdout


def test_package_sources_never_leave_the_machine(lab: LabHandle) -> None:
    r = lab.run("pve1", "grep -rhs '^deb\\|^URIs' /etc/apt/sources.list /etc/apt/sources.list.d/ || true")
    for line in r.stdout.splitlines():
        assert "file:" in line or "//127." in line, line  # local repositories only (nodes share the network)


def test_debian_release_matches_the_pve_major(lab: LabHandle) -> None:
    assert "VERSION_CODENAME=bookworm" in lab.run("pve1", "cat /etc/os-release").stdout
    assert "VERSION_CODENAME=trixie" in lab.run("pve3", "cat /etc/os-release").stdout
