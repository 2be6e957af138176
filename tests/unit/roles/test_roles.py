from gpuhost.checks.host import diagnose_cmdline
from gpuhost.facts.boot import BootInfo
from gpuhost.facts.hardware import IommuState, PciDevice
from gpuhost.facts.host import HostFacts
from gpuhost.inventory.models import ContainerSpec
from gpuhost.roles.lxc_gpu import gpu_devices
from gpuhost.roles.proxmox_host import ProxmoxHostVars, cmdline_tokens


def pv(**kw):
    return ProxmoxHostVars(gpu_path="none", **kw)


def facts(**kw):
    base = dict(
        cpu_vendor="amd",
        kernel="6.8.12-4-pve",
        pve_version=None,
        boot=BootInfo("systemd-boot", True, "uefi", ("7D41-3B3A",)),
        grub_effective_tokens=("quiet",),
        kernel_cmdline_tokens=("root=ZFS=rpool/ROOT/pve-1", "boot=zfs"),
        booted_tokens=("boot=zfs",),
        iommu=IommuState(None, True, ()),
        iommu_groups={},
        gpus=(),
        modules=frozenset(),
        nvidia=None,
        nvidia_installed=None,
        char_majors={},
        nvidia_devices=(),
    )
    base.update(kw)
    return HostFacts(**base)


def test_tokens_by_cpu_vendor():
    assert cmdline_tokens("amd", pv()) == ["iommu=pt", "amd_iommu=on"]
    assert cmdline_tokens("intel", pv(cmdline_extra=["pcie_aspm=off"])) == [
        "iommu=pt",
        "intel_iommu=on",
        "pcie_aspm=off",
    ]
    assert cmdline_tokens("amd", pv(iommu_vendor_token=False)) == ["iommu=pt"]
    assert "amd_iommu=pt" not in cmdline_tokens("amd", pv())


def test_diagnosis_names_the_wrong_file():
    f = facts(grub_effective_tokens=("quiet", "iommu=pt"))
    msg = diagnose_cmdline(f, ["iommu=pt"])
    assert "/etc/default/grub" in msg and "systemd-boot" in msg and "/etc/kernel/cmdline" in msg


def test_diagnosis_when_the_refresh_or_reboot_is_missing():
    f = facts(kernel_cmdline_tokens=("root=ZFS=rpool/ROOT/pve-1", "iommu=pt"))
    assert "was not refreshed (proxmox-boot-tool refresh)" in diagnose_cmdline(f, ["iommu=pt"])


def test_gpu_devices_for_all_and_for_a_subset():
    nodes = tuple(f"/dev/nvidia{i}" for i in range(8)) + (
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-caps/nvidia-cap1",
    )
    gpus = tuple(PciDevice(f"0000:{i:02x}:00.0", "0300", "VGA", "GB202GL", "10de", "2bb5") for i in range(8))
    f = facts(nvidia_devices=nodes, gpus=gpus)
    all_devs = gpu_devices(ContainerSpec(gpus="all"), f)
    assert all_devs[:8] == [f"/dev/nvidia{i}" for i in range(8)]
    assert all_devs[8:] == [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-caps/nvidia-cap1",
    ]
    assert gpu_devices(ContainerSpec(gpus=[2, 3]), f)[:2] == ["/dev/nvidia2", "/dev/nvidia3"]
