"""Replicas of bundles built from public real captures (tests/fixtures/bundles/SOURCE.md): what the lab node gets,
as a reader of each source file sees it."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from gpuhost.lab.replica import bundle, node, shape

BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def _pack(name: str, tmp_path: Path) -> Path:
    """The bundle of a fixture folder: its files verbatim, and a manifest with exit null (not published)."""
    root = BUNDLES / name
    files = sorted(p for p in root.rglob("*") if p.is_file())
    entries = [
        {
            "path": p.relative_to(root).as_posix(),
            "command": "published capture",
            "exit": None,
            "size": p.stat().st_size,
            "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        }
        for p in files
    ]
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"schema": "gpuhost-capture/1", "node": name, "files": entries}))
    out = tmp_path / f"{name}.capture.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        tar.add(manifest, "manifest.json")
        for p in files:
            tar.add(p, p.relative_to(root).as_posix())
    return out


def _replica(name: str, tmp_path: Path) -> shape.Replica:
    return shape.build(bundle.load(_pack(name, tmp_path)))


def test_the_systemd_boot_zfs_host_with_a_vm_holding_its_h100(tmp_path: Path) -> None:
    r = _replica("h100-pcie-vm-zfs-systemd-boot", tmp_path)
    gpus = r.gpu_plan["gpus"]
    assert isinstance(gpus, list)
    # lspci -nnk: "41:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331] (rev a1)"
    assert [(g["bdf"], g["device_id"], g["subsys_id"], g["class_code"], g["rev"]) for g in gpus] == [
        ("0000:41:00.0", "2331", "1626", "0302", "a1")
    ]
    assert gpus[0]["name"] == "NVIDIA H100 PCIe"
    assert r.gpu_model == "NVIDIA H100 PCIe"  # a model the lab simulates: no stand-in note
    assert not any("not a model the lab simulates" in n for n in r.not_reproduced)
    assert (r.boot, r.pve) == ("systemd-boot", 8)  # "configured with: uefi"; pve-manager/8.2.4
    assert r.seed["etc/kernel/cmdline"] == b"root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet intel_iommu=on iommu=pt\n"
    assert b"hostpci0: 0f:f2.0\n" in r.seed["etc/pve/qemu-server/8006.conf"]
    assert "PCI bridges: the capture lists none above the GPUs; each GPU sits on its root bus" in r.not_reproduced
    # "Kernel driver in use: vfio-pci"; no /proc/cpuinfo in the bundle, intel_iommu=on in /etc/kernel/cmdline
    assert "driver binding: the host had 0000:41:00.0 to vfio-pci; the replica's GPUs start unbound" in r.not_reproduced
    assert r.cpu == "intel"
    assert "CPU vendor: not in the bundle; intel, from the IOMMU token on the host's command line" in r.not_reproduced
    spec = node.node_spec(r, "127.0.100.1")
    assert (spec.name, spec.boot, spec.gpus, spec.pve) == ("h100-pcie-vm-zfs", "systemd-boot", 1, 8)


def test_the_four_h100_sxm5_grub_host(tmp_path: Path) -> None:
    r = _replica("h100-sxm5-4gpu-grub", tmp_path)
    gpus = r.gpu_plan["gpus"]
    assert isinstance(gpus, list)
    assert [g["bdf"] for g in gpus] == ["0000:06:00.0", "0000:0c:00.0", "0000:46:00.0", "0000:4c:00.0"]
    assert {g["device_id"] for g in gpus} == {"2330"} and gpus[0]["name"] == "NVIDIA H100 SXM5 80GB"
    assert (r.boot, r.pve) == ("grub", 8)  # "E: /etc/kernel/proxmox-boot-uuids does not exist."; 8.0.3
    assert r.cpu == "intel"  # GRUB_CMDLINE_LINUX_DEFAULT="intel_iommu=on"
    assert r.seed["etc/default/grub"].count(b'GRUB_CMDLINE_LINUX_DEFAULT="intel_iommu=on"') == 1
    assert (
        "GPU 0000:06:00.0 [10de:2330]: not a model the lab simulates; it keeps its PCI ids and name, and behaves as "
        "the lab's NVIDIA RTX PRO 6000 Blackwell Server Edition (architecture, memory, driver support)"
    ) in r.not_reproduced
    assert "GPU topology: the bundle has no nvidia-smi topo -m; the replica's is derived from the PCI tree" in (
        r.not_reproduced
    )


@pytest.mark.parametrize(
    "name", ["h100-pcie-vm-zfs-systemd-boot", "h100-sxm5-4gpu-grub", "h100-sxm5-8gpu-nvswitch-grub"]
)
def test_the_replica_always_says_what_a_lab_cannot_be(name: str, tmp_path: Path) -> None:
    notes = _replica(name, tmp_path).not_reproduced
    assert any(n.startswith("real CUDA") for n in notes) and any(
        n.startswith("real PCIe/NVLink bandwidth") for n in notes
    )


def test_the_eight_h100_sxm5_nvswitch_grub_host(tmp_path: Path) -> None:
    r = _replica("h100-sxm5-8gpu-nvswitch-grub", tmp_path)
    gpus = r.gpu_plan["gpus"]
    assert isinstance(gpus, list)
    # the IOMMU group listing's lspci -nns lines: eight "3D controller [0302] ... [10de:2330]", four NVSwitches
    assert [g["bdf"] for g in gpus] == [
        "0000:11:00.0",
        "0000:12:00.0",
        "0000:41:00.0",
        "0000:44:00.0",
        "0000:86:00.0",
        "0000:87:00.0",
        "0000:bb:00.0",
        "0000:be:00.0",
    ]
    assert {(g["device_id"], g["class_code"], g["name"]) for g in gpus} == {("2330", "0302", "NVIDIA H100 SXM5 80GB")}
    assert "PCI devices: the bundle has no lspci; the functions are the IOMMU group listing's lspci -nns lines" in (
        r.not_reproduced
    )
    assert (
        "NVSwitch: 4 NVIDIA bridge(s) in the capture (0000:05:00.0, 0000:06:00.0, 0000:07:00.0, 0000:08:00.0); the "
        "lab has no NVLink fabric (no fabric manager), the replica's GPUs reach each other over its PCI tree"
    ) in r.not_reproduced
    # no proxmox-boot-tool in the bundle: GRUB; /etc/default/grub: "quiet splash intel_iommu=on"
    assert (r.boot, r.cpu) == ("grub", "intel")
    assert b'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on"\n' in r.seed["etc/default/grub"]
    assert r.seed["etc/modprobe.d/vfio.conf"].endswith(b"options vfio-pci ids=10de:2330,10de:22a3\n")
    assert "PVE version: the bundle shows none; the replica runs PVE 8" in r.not_reproduced  # an Ubuntu KVM host
