"""GPU lab nodes over real SSH: simulated NVIDIA GPUs, the .run driver, the offline apt repository,
device nodes across reboots, containers and what gpuhost's own fact parsers make of it all.

Two nodes for the module: ``gpua`` (AMD, systemd-boot, 4 GPUs on 2 NUMA nodes) and ``gpub``
(Intel, GRUB, 2 GPUs). Each test works on one node and sets up what it needs itself.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost.connection.pct import PctConnection
from gpuhost.facts.host import host_facts
from gpuhost.facts.nvidia import userspace_version
from gpuhost.inventory import models
from gpuhost.inventory.loader import load_inventory
from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from gpuhost.p2p.parsers import read_capture
from gpuhost.runner.connect import open_connection, read_fact
from tests.lab_fixtures import CommandResult, LabHandle, lab_address, start_lab

MODEL = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
OLD, NEW = "580.95.05", "580.105.08"
REPO = Path(__file__).resolve().parents[3]
P2P_FIXTURES = REPO / "tests" / "fixtures" / "p2p"
COMM_FAIL = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
    "latest NVIDIA driver is installed and running."
)
CUINIT = (
    "import ctypes\nlib=ctypes.CDLL('libcuda.so.1')\nrc=lib.cuInit(0)\nname=ctypes.c_char_p()\n"
    "lib.cuGetErrorName(rc,ctypes.byref(name))\nn=ctypes.c_int(0)\n"
    "lib.cuDeviceGetCount(ctypes.byref(n)) if rc==0 else None\nprint(rc,name.value.decode(),n.value)\n"
)


@pytest.fixture(scope="module")
def gpu_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    state = tmp_path_factory.mktemp("gpulab") / "state"
    handle = start_lab(
        state,
        [
            NodeSpec("gpua", lab_address(6, 1), boot="systemd-boot", cpu="amd", pve=8, gpus=4, gpu_model=MODEL, numa=2),
            NodeSpec("gpub", lab_address(6, 2), boot="grub", cpu="intel", pve=8, gpus=2, gpu_model=MODEL, numa=1),
        ],
    )
    try:
        yield handle
    finally:
        handle.close()
        manager.down(state)


def ok(lab: LabHandle, node: str, command: str, timeout: float = 60) -> str:
    r = lab.run(node, command, timeout)
    assert r.rc == 0, f"{node}: {command} -> exit {r.rc}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def reboot(lab: LabHandle, node: str) -> None:
    before = lab.boots(node)
    lab.run(node, "reboot")
    lab.close()
    lab.wait_rebooted(node, before)


def driver(lab: LabHandle, version: str) -> dict[str, str]:
    inv = load_inventory(lab.inventory)
    return {"version": version, **inv.vars["lab_nvidia_drivers"][version]}


def fetch_installer(lab: LabHandle, node: str, version: str) -> str:
    """What gpuhost does: curl the inventory's URL, check its sha256."""
    d = driver(lab, version)
    path = f"/var/cache/gpuhost/NVIDIA-Linux-x86_64-{version}.run"
    ok(
        lab,
        node,
        f"mkdir -p /var/cache/gpuhost && curl -fsSL -o {path} {shlex.quote(d['url'])} && "
        f"echo '{d['sha256']}  {path}' | sha256sum -c --status",
    )
    return path


def install_host_driver(lab: LabHandle, node: str, version: str) -> CommandResult:
    path = fetch_installer(lab, node, version)
    return lab.run(node, f"sh {path} --silent --no-x-check --no-nouveau-check --dkms -m=kernel-open", 120)


def wait_for(lab: LabHandle, node: str, command: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while lab.run(node, command).rc != 0:
        assert time.monotonic() < deadline, f"{node}: '{command}' never succeeded"
        time.sleep(0.1)


def devices(lab: LabHandle, node: str) -> list[str]:
    """``/dev/nvidia*`` (gpuhost's own probe adds ``/dev/nvidia-caps/*`` and loses everything when
    that directory is absent, as on most hosts: not used here)."""
    return lab.run(node, "ls -1d /dev/nvidia*").stdout.split()


def facts(lab: LabHandle, node: str):  # noqa: ANN201 - gpuhost.facts.host.HostFacts
    inv = load_inventory(lab.inventory)
    conn = open_connection(inv.nodes[node])
    try:
        return read_fact(conn, host_facts)
    finally:
        conn.close()


# ---- hardware before any driver -------------------------------------------------------------


def test_inventory_pins_a_driver_and_names_a_gpu_container(gpu_lab: LabHandle) -> None:
    inv = load_inventory(gpu_lab.inventory)
    assert inv.vars["nvidia_driver"]["version"] == OLD  # the newest but one: tests can upgrade
    assert set(inv.vars["lab_nvidia_drivers"]) == {OLD, NEW}
    assert re.fullmatch(r"[0-9a-f]{64}", inv.vars["nvidia_driver"]["sha256"])
    ct = inv.nodes["gpua"].containers[200]
    assert isinstance(ct, models.ContainerSpec) and ct.gpus == "all" and ct.rootfs == "local-zfs:8"
    assert inv.nodes["gpub"].containers[200].rootfs == "local-lvm:8"


def test_pci_devices_cpu_and_firmware_as_gpuhost_reads_them(gpu_lab: LabHandle) -> None:
    f = facts(gpu_lab, "gpua")
    assert f.cpu_vendor == "amd" and f.boot.loader == "systemd-boot" and f.boot.efi
    assert [g.bdf for g in f.gpus] == ["0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0"]
    assert {(g.vendor, g.device, g.class_code, g.driver) for g in f.gpus} == {("10de", "2bb5", "0302", None)}
    assert all(g.bdf in f.iommu_groups for g in f.gpus)  # AMD: IOMMU on by default
    assert f.iommu.default_domain == "Translated" and f.nvidia is None and f.nvidia_installed is None
    assert devices(gpu_lab, "gpua") == []
    fb = facts(gpu_lab, "gpub")
    assert fb.cpu_vendor == "intel" and fb.boot.loader == "grub" and not fb.boot.efi and len(fb.gpus) == 2
    vv = ok(gpu_lab, "gpua", "lspci -vv -s 03:00.0")
    assert "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM L1, Exit Latency L1 unlimited\n" in vv
    assert "\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x16\n" in vv
    assert ok(gpu_lab, "gpua", "lspci -nn -d 10de:").startswith(
        "03:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2bb5] (rev a1)\n"
    )
    r = gpu_lab.run("gpua", "nvidia-smi")
    assert r.rc == 127  # no driver installed yet


def test_iommu_groups_need_the_right_file_a_refresh_and_a_reboot(gpu_lab: LabHandle) -> None:
    """GRUB node booted with the IOMMU off: only /etc/default/grub + update-grub + reboot turn it on."""
    node = "gpub"
    ok(
        gpu_lab,
        node,
        "sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=\"quiet intel_iommu=off\"/'"
        " /etc/default/grub && update-grub",
    )
    reboot(gpu_lab, node)
    assert ok(gpu_lab, node, "find /sys/kernel/iommu_groups -mindepth 1 | wc -l").strip() == "0"
    assert "DMAR: IOMMU disabled" in ok(gpu_lab, node, "dmesg | grep -E 'iommu: Default domain|AMD-Vi|DMAR'")
    # the systemd-boot file on a GRUB node, then the right file without update-grub: no effect
    ok(gpu_lab, node, "echo 'root=/dev/mapper/pve-root ro quiet intel_iommu=on iommu=pt' > /etc/kernel/cmdline")
    ok(
        gpu_lab,
        node,
        "sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=\"quiet intel_iommu=on "
        "iommu=pt\"/' /etc/default/grub",
    )
    reboot(gpu_lab, node)
    assert facts(gpu_lab, node).iommu_groups == {}
    ok(gpu_lab, node, "update-grub")
    reboot(gpu_lab, node)
    f = facts(gpu_lab, node)
    assert "iommu=pt" in f.booted_tokens and f.iommu.default_domain == "Passthrough"
    assert sorted(f.iommu_groups) == [
        "0000:00:01.1",
        "0000:01:00.0",
        "0000:02:00.0",
        "0000:02:01.0",
        "0000:03:00.0",
        "0000:04:00.0",
    ]
    assert "iommu: Default domain type: Passthrough (set via kernel command line)" in ok(gpu_lab, node, "dmesg")


# ---- the host driver ------------------------------------------------------------------------


def test_host_driver_dkms_device_nodes_and_uvm_across_reboots(gpu_lab: LabHandle) -> None:
    node = "gpua"
    r = install_host_driver(gpu_lab, node, OLD)
    assert r.rc == 1 and "Unable to find the kernel source tree" in r.stderr  # no headers yet
    ok(
        gpu_lab,
        node,
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q dkms proxmox-default-headers proxmox-headers-$(uname -r)",
    )
    assert (
        ok(gpu_lab, node, "test -e /lib/modules/$(uname -r)/build && dpkg-query -W -f '${Version}' dkms")
        == "3.0.10-8+deb12u1"
    )
    r = install_host_driver(gpu_lab, node, OLD)
    assert r.rc == 0, r.stderr
    assert ok(gpu_lab, node, "dkms status").strip() == f"nvidia/{OLD}, 6.8.12-4-pve, x86_64: installed"
    f = facts(gpu_lab, node)
    assert f.nvidia is not None and (f.nvidia.version, f.nvidia.open) == (OLD, True)
    assert f.nvidia_installed == OLD
    assert devices(gpu_lab, node) == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3", "/dev/nvidiactl"]
    assert f.char_majors["nvidia"] == 195 and "nvidia-uvm" not in f.char_majors
    assert {g.driver for g in f.gpus} == {"nvidia"}
    assert ok(gpu_lab, node, "stat -c '%t:%T' /dev/nvidiactl").strip() == "c3:ff"  # 195:255
    # nvidia-modprobe -u loads nvidia_uvm and makes its nodes, on a dynamic major
    ok(gpu_lab, node, "nvidia-modprobe -c0 -u")
    f = facts(gpu_lab, node)
    uvm = f.char_majors["nvidia-uvm"]
    assert uvm > 255 and {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"} <= set(devices(gpu_lab, node))
    assert ok(gpu_lab, node, "stat -c '%t' /dev/nvidia-uvm").strip() == f"{uvm:x}"
    # a reboot: nothing loads the module, nothing makes device nodes
    reboot(gpu_lab, node)
    f = facts(gpu_lab, node)
    assert f.nvidia is None and f.nvidia_installed == OLD and devices(gpu_lab, node) == []
    r = gpu_lab.run(node, "nvidia-smi -L")
    assert (r.rc, r.stdout.strip()) == (9, COMM_FAIL)
    # modules-load.d loads both modules at boot, but only a unit recreates /dev/nvidia-uvm
    ok(gpu_lab, node, "printf 'nvidia\\nnvidia_uvm\\n' > /etc/modules-load.d/nvidia.conf")
    reboot(gpu_lab, node)
    f = facts(gpu_lab, node)
    assert f.nvidia is not None and "nvidia-uvm" in f.char_majors and devices(gpu_lab, node) == []
    unit = (REPO / "templates" / "nvidia-devnodes.service.j2").read_text()
    ok(
        gpu_lab,
        node,
        f"cat > /etc/systemd/system/nvidia-devnodes.service <<'EOF'\n{unit}EOF\n"
        "systemctl enable nvidia-devnodes.service",
    )
    reboot(gpu_lab, node)
    wait_for(gpu_lab, node, "test -c /dev/nvidia-uvm && test -c /dev/nvidia3")
    assert ok(gpu_lab, node, "nvidia-smi -L").count(f": {MODEL} (UUID: GPU-") == 4


def test_dkms_missing_means_a_silent_plain_module_and_blackwell_needs_open_modules(gpu_lab: LabHandle) -> None:
    node = "gpub"
    ok(gpu_lab, node, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q proxmox-headers-$(uname -r)")
    path = fetch_installer(gpu_lab, node, OLD)
    r = gpu_lab.run(node, f"sh {path} --silent --no-x-check --no-nouveau-check --dkms")  # proprietary flavour
    assert r.rc == 1 and "Unable to load the kernel module 'nvidia.ko'" in r.stderr
    assert "requires use of the NVIDIA open kernel modules" in ok(gpu_lab, node, "dmesg")
    r = gpu_lab.run(node, f"sh {path} --silent --no-x-check --no-nouveau-check --dkms -m=kernel-open")
    assert r.rc == 0 and r.stdout == "" and r.stderr == ""  # silent: no DKMS, no word
    assert gpu_lab.run(node, "command -v dkms").rc == 1
    assert (
        ok(gpu_lab, node, "modinfo -F filename nvidia").strip()
        == "/lib/modules/6.8.12-4-pve/kernel/drivers/video/nvidia.ko"
    )
    assert "dkms is not installed" in ok(gpu_lab, node, "cat /var/log/nvidia-installer.log")


def test_nvidia_smi_formats_and_topology_parse_like_real_captures(gpu_lab: LabHandle) -> None:
    node = "gpua"
    if gpu_lab.run(node, "test -e /proc/driver/nvidia/version").rc != 0:
        ok(gpu_lab, node, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q dkms proxmox-headers-$(uname -r)")
        assert install_host_driver(gpu_lab, node, OLD).rc == 0
    csv = ok(
        gpu_lab,
        node,
        "nvidia-smi --query-gpu=index,pci.bus_id,driver_version,memory.total,"
        "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max "
        "--format=csv",
    )
    lines = csv.splitlines()
    assert lines[0] == (
        "index, pci.bus_id, driver_version, memory.total [MiB], pcie.link.gen.current, "
        "pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max"
    )
    assert lines[1] == f"0, 00000000:03:00.0, {OLD}, 97887 MiB, 1, 5, 16, 16"
    assert ok(gpu_lab, node, "nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 3") == "97887\n"
    r = gpu_lab.run(node, "nvidia-smi --query-gpu=bogus --format=csv")
    assert (r.rc, r.stdout.strip()) == (2, 'Field "bogus" is not a valid field to query.')
    assert "Product Name                                       : " + MODEL in ok(gpu_lab, node, "nvidia-smi -q")
    assert (
        ok(gpu_lab, node, "nvidia-smi -pm 1 -i 0") == "Enabled persistence mode for GPU 00000000:03:00.0.\nAll done.\n"
    )
    assert ok(gpu_lab, node, "nvidia-smi --query-gpu=persistence_mode --format=csv,noheader -i 2") == "Enabled\n"
    # topo -m: same layout as a real capture (tabs, padded self cell, the legend word for word)
    topo = ok(gpu_lab, node, "nvidia-smi topo -m")
    real = (P2P_FIXTURES / "topo-m_2x-h200-vm_nvlink.txt").read_text()
    assert topo[topo.index("\nLegend:") :] == real[real.index("\nLegend:") :]
    assert topo.splitlines()[0] == "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    assert topo.splitlines()[1] == "GPU0\t X \tPIX\tSYS\tSYS\t0-63,128-191\t0\t\tN/A"
    assert topo.splitlines()[3] == "GPU2\tSYS\tSYS\t X \tPIX\t64-127,192-255\t1\t\tN/A"
    # topo -p2p r: gpuhost's reader of captured outputs reads the lab's output and a real capture alike
    for text, n in (
        (ok(gpu_lab, node, "nvidia-smi topo -p2p r"), 4),
        ((P2P_FIXTURES / "topo-p2p_2x-h200-vm_nvlink.txt").read_text(), 2),
    ):
        evidence, _ = read_capture(text, source="topo")
        assert evidence.source == "nvidia-smi topo -p2p" and len(evidence.gpus) == n
        assert {p.nvml_status["read"] for p in evidence.pairs} == {"OK"} and len(evidence.pairs) == n * (n - 1)


# ---- containers -----------------------------------------------------------------------------


def test_container_sees_passed_gpus_only_with_the_hosts_exact_userspace(gpu_lab: LabHandle) -> None:
    node, ctid = "gpua", 210
    ok(gpu_lab, node, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q dkms proxmox-headers-$(uname -r)")
    if gpu_lab.run(node, "grep -q ' 580.95.05 ' /proc/driver/nvidia/version").rc != 0:
        assert install_host_driver(gpu_lab, node, OLD).rc == 0
    ok(gpu_lab, node, "test -c /dev/nvidia-uvm || nvidia-modprobe -c0 -u")
    ok(
        gpu_lab,
        node,
        f"pct create {ctid} local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname llm "
        "--memory 4096 --rootfs local-zfs:8 --unprivileged 0 && "
        f"pct set {ctid} --dev0 /dev/nvidia1,gid=44 --dev1 /dev/nvidia2,gid=44 --dev2 /dev/nvidiactl,gid=44"
        " --dev3 /dev/nvidia-uvm,gid=44 --dev4 /dev/nvidia-uvm-tools,gid=44 && "
        f"pct start {ctid} && pct exec {ctid} -- mkdir -p /var/cache/gpuhost",
    )
    inv = load_inventory(gpu_lab.inventory)
    node_conn = open_connection(inv.nodes[node])
    ct = PctConnection(node_conn, ctid)
    try:
        assert ct.run("nvidia-smi -L", check=False).exit_code == 127
        for version in (NEW, OLD):
            path = fetch_installer(gpu_lab, node, version)
            ok(
                gpu_lab,
                node,
                f"pct push {ctid} {path} {path} && pct exec {ctid} -- sh {path} --silent --no-x-check "
                "--no-nouveau-check --no-kernel-modules",
            )
            assert read_fact(ct, userspace_version) == version
            smi = ct.run("nvidia-smi -L", check=False)
            cu = ct.run("python3 -", input=CUINIT, check=False).stdout.split()
            if version == NEW:  # the host runs 580.95.05
                assert smi.exit_code == 18
                assert (
                    smi.stdout == "Failed to initialize NVML: Driver/library version mismatch\n"
                    "NVML library version: 580.105\n"
                )
                assert cu == ["803", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "0"]
        listed = smi.stdout.splitlines()
        uuids = ok(gpu_lab, node, "nvidia-smi --query-gpu=uuid --format=csv,noheader -i 1,2").split()
        assert smi.exit_code == 0 and listed == [f"GPU {i}: {MODEL} (UUID: {u})" for i, u in enumerate(uuids)]
        assert cu == ["0", "CUDA_SUCCESS", "2"]
        evidence, _ = read_capture(ct.run("nvidia-smi topo -p2p r").stdout)
        assert {p.nvml_status["read"] for p in evidence.pairs} == {"OK"} and len(evidence.gpus) == 2
        assert ct.run("ulimit -l").stdout.strip() == "8192"
        ok(gpu_lab, node, f"echo 'lxc.prlimit.memlock: unlimited' >> /etc/pve/lxc/{ctid}.conf && pct reboot {ctid}")
        assert ct.run("ulimit -l").stdout.strip() == "unlimited"
        ok(gpu_lab, node, f"pct stop {ctid} && pct set {ctid} --delete dev3,dev4 && pct start {ctid}")
        assert ct.run("test -c /dev/nvidia-uvm", check=False).exit_code == 1
        assert ct.run("python3 -", input=CUINIT).stdout.split() == ["999", "CUDA_ERROR_UNKNOWN", "0"]
    finally:
        node_conn.close()


def test_host_driver_upgrade_without_reboot_keeps_the_old_module(gpu_lab: LabHandle) -> None:
    node, ctid = "gpub", 220
    ok(gpu_lab, node, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q dkms proxmox-headers-$(uname -r)")
    if gpu_lab.run(node, f"grep -q ' {OLD} ' /proc/driver/nvidia/version").rc != 0:
        assert install_host_driver(gpu_lab, node, OLD).rc == 0
    ok(gpu_lab, node, "nvidia-modprobe -c0 -u")
    ok(
        gpu_lab,
        node,
        f"pct create {ctid} local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname up "
        "--memory 2048 --rootfs local-lvm:8 && "
        f"pct set {ctid} --dev0 /dev/nvidia0 --dev1 /dev/nvidiactl --dev2 /dev/nvidia-uvm && "
        f"pct start {ctid} && pct exec {ctid} -- mkdir -p /var/cache/gpuhost",
    )
    # nvidia-persistenced holds the module: --silent aborts (nvidia-installer kernel.c:1694-1745) unless
    # --allow-installation-with-running-driver, which installs and leaves the old module loaded
    ok(gpu_lab, node, "nvidia-persistenced --verbose")
    refused = install_host_driver(gpu_lab, node, NEW)
    assert refused.rc == 1 and "(Answer: Abort installation)" in refused.stderr
    assert "ERROR: Installation has failed." in refused.stderr
    path = fetch_installer(gpu_lab, node, NEW)
    ok(
        gpu_lab,
        node,
        f"sh {path} --silent --no-x-check --no-nouveau-check --dkms -m=kernel-open "
        "--allow-installation-with-running-driver",
    )
    f = facts(gpu_lab, node)
    assert (f.nvidia.version if f.nvidia else None, f.nvidia_installed) == (OLD, NEW)
    host_smi = gpu_lab.run(node, "nvidia-smi -L")
    assert host_smi.rc == 18 and "NVML library version: 580.105" in host_smi.stdout
    path = f"/var/cache/gpuhost/NVIDIA-Linux-x86_64-{NEW}.run"
    ok(gpu_lab, node, f"pct push {ctid} {path} {path} && pct exec {ctid} -- sh {path} --silent --no-kernel-modules")
    r = gpu_lab.run(node, f"pct exec {ctid} -- nvidia-smi -L")
    assert r.rc == 18 and "Driver/library version mismatch" in r.stdout
    ok(gpu_lab, node, "printf 'nvidia\\nnvidia_uvm\\n' > /etc/modules-load.d/nvidia.conf")
    reboot(gpu_lab, node)
    assert facts(gpu_lab, node).nvidia.version == NEW  # type: ignore[union-attr]
    ok(gpu_lab, node, f"nvidia-modprobe -c0 -u && pct start {ctid}")
    assert ok(gpu_lab, node, f"pct exec {ctid} -- nvidia-smi -L").startswith(f"GPU 0: {MODEL} (UUID: GPU-")


def test_vm_config_shows_what_a_guest_would_get(gpu_lab: LabHandle) -> None:
    node = "gpua"
    ok(
        gpu_lab,
        node,
        "qm create 310 --name gpuvm --memory 8192 --machine q35 --bios ovmf && "
        "qm set 310 --hostpci0 0000:83:00.0,pcie=1 --hostpci1 0000:84:00.0,pcie=1 "
        "--args '-set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0'",
    )
    cmd = ok(gpu_lab, node, "qm showcmd 310 --pretty")
    assert "-device 'vfio-pci,host=0000:83:00.0,id=hostpci0,bus=ich9-pcie-port-1,addr=0x0'" in cmd
    assert "-device 'vfio-pci,host=0000:84:00.0,id=hostpci1,bus=ich9-pcie-port-2,addr=0x0'" in cmd
    assert "-set 'device.hostpci0.x-nv-gpudirect-clique=0'" in cmd
    r = gpu_lab.run(node, "qm set 310 --hostpci2 0000:c3:00.0 && qm start 310")
    assert r.rc != 0 and "no PCI device found for '0000:c3:00.0'" in r.stderr
