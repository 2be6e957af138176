"""The lab's GPU simulation without nodes: IOMMU rules, GPU placement, nvidia-smi formats, the
apt repository, the .run installer archive and the compiled libcuda."""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
from pathlib import Path

import pytest

from gpuhost.errors import UsageError
from gpuhost.lab.gpu import apt_repo, installers, topology
from gpuhost.lab.gpu.catalog import DEFAULT_MODEL, model
from gpuhost.lab.node import iommu
from gpuhost.lab.node.nvidia import kernel, smi, topo
from gpuhost.lab.node.nvidia import paths as kpaths
from gpuhost.lab.node.nvidia.gpus import Gpu
from gpuhost.p2p.parsers import read_capture

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "p2p"


def gpus(count: int, numa: int) -> list[Gpu]:
    return [Gpu.from_dict(g) for g in topology.plan("n1", "amd", count, model(DEFAULT_MODEL), numa)["gpus"]]


@pytest.mark.parametrize(
    ("cpu", "cmdline", "enabled", "passthrough", "unknown"),
    [
        ("amd", "root=ZFS=rpool/ROOT/pve-1 boot=zfs", True, False, []),
        ("amd", "quiet amd_iommu=on iommu=pt", True, True, ["on"]),
        ("amd", "quiet amd_iommu=pt", True, False, ["pt"]),
        ("amd", "quiet amd_iommu=off", False, False, []),
        ("amd", "quiet iommu=off", False, False, []),
        ("intel", "quiet", True, False, []),
        ("intel", "quiet intel_iommu=off", False, False, []),
        ("intel", "quiet amd_iommu=off iommu.passthrough=1", True, True, []),
    ],
)
def test_iommu_follows_the_kernel_rules(
    cpu: str, cmdline: str, enabled: bool, passthrough: bool, unknown: list[str]
) -> None:
    st = iommu.state(cmdline.split(), cpu)
    assert (st.enabled, st.passthrough, st.amd_unknown) == (enabled, passthrough, unknown)


def test_gpu_placement_pairs_behind_switches_per_socket() -> None:
    g = gpus(8, 2)
    assert [x.bdf for x in g] == [
        "0000:03:00.0",
        "0000:04:00.0",
        "0000:23:00.0",
        "0000:24:00.0",
        "0000:83:00.0",
        "0000:84:00.0",
        "0000:a3:00.0",
        "0000:a4:00.0",
    ]
    assert [g[0].link(x) for x in g[1:]] == ["PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    assert g[0].cpulist == "0-63,128-191" and g[7].cpulist == "64-127,192-255"
    odd = gpus(3, 1)
    assert odd[2].switch is None and odd[0].link(odd[2]) == "NODE" and odd[0].cpulist == "0-63,64-127"
    assert len({x.uuid for x in g}) == 8 and g[0].nvml_bus_id == "00000000:03:00.0"


def test_bad_gpu_requests_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        model("NVIDIA GeForce RTX 5090")
    with pytest.raises(UsageError):
        topology.plan("n1", "amd", 2, model(DEFAULT_MODEL), 3)
    with pytest.raises(UsageError):
        topology.plan("n1", "amd", 17, model(DEFAULT_MODEL), 1)


def test_topo_matrix_has_the_real_layout_and_p2p_parses_like_a_capture() -> None:
    text = topo.matrix(gpus(2, 1))
    real = (FIXTURES / "topo-m_2x-h200-vm_nvlink.txt").read_text()
    assert text[text.index("\nLegend:") :] == real[real.index("\nLegend:") :]
    assert text.splitlines()[1] == "GPU0\t X \tPIX\t0-63,64-127\t0\t\tN/A"
    tty = topo.p2p(gpus(2, 1), "r", tty=True)
    assert tty.splitlines()[0] == " \t\x1b[4mGPU0\tGPU1\t\x1b[0m"  # as a terminal shows it
    real_p2p = (FIXTURES / "topo-p2p_2x-h200-vm_nvlink.txt").read_text()
    assert (
        tty[tty.index("\nLegend:") :]
        == real_p2p[real_p2p.index("\nLegend:") : real_p2p.index("== nvidia-smi topo -p2p w")]
    )
    evidence, _ = read_capture("nvidia-smi topo -p2p n\n" + topo.p2p(gpus(4, 2), "n"))
    assert {p.nvml_status["nvlink"] for p in evidence.pairs} == {"NS"} and len(evidence.pairs) == 12


def test_query_gpu_csv_units_and_errors() -> None:
    g = gpus(2, 1)
    out = smi.query(g, ["index", "memory.total", "power.limit"], ["csv"], "580.95.05")
    assert out.splitlines() == [
        "index, memory.total [MiB], power.limit [W]",
        "0, 97887 MiB, 600.00 W",
        "1, 97887 MiB, 600.00 W",
    ]
    assert smi.query(g, ["memory.total"], ["csv", "noheader", "nounits"], "580.95.05") == "97887\n97887\n"
    with pytest.raises(smi.SmiExit) as exc:
        smi.query(g, ["nope"], ["csv"], "580.95.05")
    assert exc.value.code == 2 and exc.value.text.startswith('Field "nope" is not a valid field to query.')


def test_proc_devices_gets_dynamic_majors_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    devices = tmp_path / "devices"
    devices.write_text("Character devices:\n  1 mem\n195 other\n254 gpiochip\n511 taken\n\nBlock devices:\n  7 loop\n")
    monkeypatch.setattr(kpaths, "PROC_DEVICES_SOURCE", str(devices))
    assert kernel.register_chrdev("nvidia-caps") == 253
    assert kernel.register_chrdev("nvidia-uvm", extended=True) == 510
    assert kernel.register_chrdev("nvidia-uvm", extended=True) == 510  # already there
    assert devices.read_text() == (
        "Character devices:\n  1 mem\n195 other\n253 nvidia-caps\n254 gpiochip\n"
        "510 nvidia-uvm\n511 taken\n\nBlock devices:\n  7 loop\n"
    )
    kernel.unregister_chrdev("nvidia-uvm")
    assert "nvidia-uvm" not in kernel.char_majors()


def test_apt_repository_has_real_debs_and_an_index(tmp_path: Path) -> None:
    repo = apt_repo.build_repository(tmp_path / "repo", 8)
    packages = (repo / "Packages").read_text()
    names = [line.split(": ")[1] for line in packages.splitlines() if line.startswith("Package: ")]
    assert names == [
        "dkms",
        "proxmox-headers-6.8.12-4-pve",
        "linux-headers-6.8.12-4-pve",  # what a VM's Debian guest installs for the same kernel
        "proxmox-headers-6.8",
        "proxmox-default-headers",
        "pve-headers",
        "pve-manager",
    ]
    assert "Depends: proxmox-headers-6.8\n" in packages
    deb = repo / "proxmox-headers-6.8.12-4-pve_6.8.12-4_amd64.deb"
    assert f"SHA256: {hashlib.sha256(deb.read_bytes()).hexdigest()}" in packages
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    assert "./lib/modules/6.8.12-4-pve/build -> /usr/src/linux-headers-6.8.12-4-pve" in listing


def test_run_installer_is_a_shell_archive_with_a_real_libcuda(tmp_path: Path) -> None:
    inst = installers.build_installer("580.95.05", tmp_path)
    data = inst.path.read_bytes()
    assert inst.sha256 == hashlib.sha256(data).hexdigest() and inst.url.endswith("NVIDIA-Linux-x86_64-580.95.05.run")
    r = subprocess.run(["sh", str(inst.path), "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "nvidia-installer:  version 580.95.05" in r.stdout
    lib = tmp_path / "libcuda.so"
    installers.compile_libcuda("580.95.05", lib)
    cuda = ctypes.CDLL(str(lib))
    rc = cuda.cuInit(0)
    name = ctypes.c_char_p()
    cuda.cuGetErrorName(rc, ctypes.byref(name))
    assert (rc, name.value) == (100, b"CUDA_ERROR_NO_DEVICE")  # this machine has no NVIDIA driver
    count = ctypes.c_int(-1)
    assert cuda.cuDeviceGetCount(ctypes.byref(count)) == 3  # CUDA_ERROR_NOT_INITIALIZED
