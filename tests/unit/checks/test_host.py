"""Host proofs from scenarios a user can cause: a token removed from the boot entry, the boot loader not refreshed,
a module installed but not loaded, a GPU held by another driver. Expected levels and messages are written here."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuhost.checks.finding import Level
from gpuhost.checks.host import (
    HostExpectation,
    cmdline_booted,
    cmdline_configured,
    diagnose_cmdline,
    iommu_groups,
    iommu_passthrough,
    nvidia_module,
    nvidia_uvm,
    persistenced,
    vfio_bound,
)
from gpuhost.checks.table import host_findings
from gpuhost.facts.boot import BootInfo
from gpuhost.facts.hardware import IommuState, NvidiaKernelModule, PciDevice
from gpuhost.facts.host import HostFacts

TOKENS = ("iommu=pt", "amd_iommu=on")
SDBOOT = BootInfo("systemd-boot", True, "uefi", ("7D41-3B3A",))
GRUB = BootInfo("grub", False, None)


def gpu(bdf: str, driver: str | None = "nvidia") -> PciDevice:
    return PciDevice(bdf, "0302", "3D controller", "NVIDIA Corporation GH100 [H200 SXM 141GB]", "10de", "2335", driver)


GOOD = HostFacts(
    cpu_vendor="amd",
    kernel="6.8.12-4-pve",
    pve_version="8.3.0",
    boot=SDBOOT,
    grub_effective_tokens=("quiet",),
    kernel_cmdline_tokens=("root=ZFS=rpool/ROOT/pve-1", "boot=zfs", *TOKENS),
    booted_tokens=("initrd=\\EFI\\proxmox\\initrd.img", "root=ZFS=rpool/ROOT/pve-1", "boot=zfs", *TOKENS),
    iommu=IommuState("Passthrough", True, ()),
    iommu_groups={"0000:41:00.0": 12, "0000:c1:00.0": 40},
    gpus=(gpu("0000:41:00.0"), gpu("0000:c1:00.0")),
    modules=frozenset({"nvidia", "nvidia_uvm"}),
    nvidia=NvidiaKernelModule("570.133.20", False),
    nvidia_installed="570.133.20",
    char_majors={"nvidia-uvm": 510},
    nvidia_devices=("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"),
    persistenced="active",
)
ALL = HostExpectation(cmdline=TOKENS, nvidia_driver="570.133.20", nvidia_uvm=True, persistenced=True)


def test_a_provisioned_host_passes_every_proof() -> None:
    fs = host_findings(GOOD, "pve1", ALL)
    assert [(f.check, f.level, f.message) for f in fs] == [
        ("host.cmdline_booted", Level.PASS, "booted with iommu=pt amd_iommu=on"),
        ("host.cmdline_configured", Level.PASS, "/etc/kernel/cmdline has iommu=pt amd_iommu=on"),
        ("host.iommu_passthrough", Level.PASS, "IOMMU default domain Passthrough"),
        ("host.iommu_groups", Level.PASS, "2/2 GPUs in IOMMU groups"),
        ("host.nvidia_module", Level.PASS, "NVIDIA 570.133.20 loaded"),
        ("host.nvidia_uvm", Level.PASS, "/dev/nvidia-uvm present"),
        ("host.persistenced", Level.PASS, "nvidia-persistenced active"),
    ]
    assert {f.subject for f in fs} == {"pve1"}
    vfio = host_findings(
        replace(GOOD, booted_tokens=(), iommu_groups={}), "pve2", ALL.model_copy(update={"vfio": True})
    )
    assert {f.subject for f in vfio} == {"pve2"} and len(vfio) == 7


def test_a_token_removed_from_the_boot_entry_fails_the_configured_proof_only() -> None:
    f = replace(GOOD, kernel_cmdline_tokens=("root=ZFS=rpool/ROOT/pve-1", "boot=zfs", "amd_iommu=on"))
    booted, configured = (
        cmdline_booted(f, "pve1", HostExpectation(cmdline=TOKENS)),
        cmdline_configured(f, "pve1", HostExpectation(cmdline=TOKENS)),
    )
    assert booted.level is Level.PASS
    assert configured.level is Level.FAIL and configured.message == "/etc/kernel/cmdline lacks iommu=pt"
    assert configured.cause == "the next boot comes up without iommu=pt (systemd-boot (proxmox-boot-tool), UEFI)"


def test_an_unreadable_boot_entry_fails() -> None:
    f = cmdline_configured(replace(GOOD, kernel_cmdline_tokens=None), "pve1", HostExpectation(cmdline=TOKENS))
    assert (
        f.level is Level.FAIL
        and f.message == "/etc/kernel/cmdline cannot be read (systemd-boot (proxmox-boot-tool), UEFI)"
    )


def test_booted_without_the_tokens_after_an_edit_says_refresh_or_reboot() -> None:
    f = cmdline_booted(replace(GOOD, booted_tokens=("boot=zfs",)), "pve1", HostExpectation(cmdline=TOKENS))
    assert f.level is Level.FAIL and f.message == "/proc/cmdline lacks iommu=pt amd_iommu=on"
    assert f.cause == (
        "/etc/kernel/cmdline has iommu=pt amd_iommu=on, but the host booted without it: the boot loader was not "
        "refreshed (proxmox-boot-tool refresh) or the host was not rebooted since"
    )
    assert f.fix == "gpuhost provision host --allow-reboot"


def test_tokens_in_the_file_the_other_boot_loader_reads_are_named() -> None:
    sd = replace(GOOD, booted_tokens=(), kernel_cmdline_tokens=("boot=zfs",), grub_effective_tokens=TOKENS)
    assert diagnose_cmdline(sd, list(TOKENS)).startswith(
        "iommu=pt amd_iommu=on is in /etc/default/grub, but this host boots with systemd-boot, which reads "
        "/etc/kernel/cmdline"
    )
    grub = replace(sd, boot=GRUB, kernel_cmdline_tokens=TOKENS, grub_effective_tokens=("quiet",))
    assert diagnose_cmdline(grub, list(TOKENS)) == (
        "iommu=pt amd_iommu=on is in /etc/kernel/cmdline, but this host boots with GRUB (not managed by "
        "proxmox-boot-tool), legacy BIOS, which reads /etc/default/grub: put the tokens there and run update-grub"
    )
    nowhere = replace(grub, kernel_cmdline_tokens=(), grub_effective_tokens=())
    assert diagnose_cmdline(nowhere, ["iommu=pt"]) == (
        "/etc/default/grub lacks iommu=pt (GRUB (not managed by proxmox-boot-tool), legacy BIOS)"
    )


def test_passthrough_is_checked_only_when_booted_with_iommu_pt() -> None:
    translated = replace(GOOD, iommu=IommuState("Translated", True, ()))
    f = iommu_passthrough(translated, "pve1", ALL)
    assert f is not None and f.level is Level.FAIL
    assert f.message == "dmesg: IOMMU default domain is Translated, not Passthrough"
    assert iommu_passthrough(replace(GOOD, iommu=IommuState(None, None, ())), "pve1", ALL) is None
    not_booted = replace(translated, booted_tokens=("boot=zfs",))
    assert "host.iommu_passthrough" not in {f.check for f in host_findings(not_booted, "pve1", ALL)}
    no_pt = HostExpectation(cmdline=("amd_iommu=on",))
    assert "host.iommu_passthrough" not in {f.check for f in host_findings(translated, "pve1", no_pt)}
    off = HostExpectation(cmdline=TOKENS, iommu_passthrough=False)
    assert "host.iommu_passthrough" not in {f.check for f in host_findings(translated, "pve1", off)}


def test_iommu_groups() -> None:
    none = iommu_groups(replace(GOOD, iommu_groups={}), "pve1", ALL)
    assert none is not None and none.level is Level.FAIL
    assert none.message == "no IOMMU groups under /sys/kernel/iommu_groups: the IOMMU is off"
    half = iommu_groups(replace(GOOD, iommu_groups={"0000:41:00.0": 12}), "pve1", ALL)
    assert half is not None and (half.level, half.message) == (Level.FAIL, "1/2 GPUs in IOMMU groups")
    assert iommu_groups(replace(GOOD, gpus=()), "pve1", ALL) is None


def test_a_module_installed_but_not_loaded_says_reboot() -> None:
    f = nvidia_module(
        replace(GOOD, nvidia=NvidiaKernelModule("550.54.14", False)),
        "pve1",
        HostExpectation(nvidia_driver="570.133.20"),
    )
    assert f.level is Level.FAIL and f.message == "NVIDIA kernel module 550.54.14, wanted 570.133.20"
    assert f.cause == "570.133.20 is installed but 550.54.14 is still loaded: the host has not rebooted since"
    other = nvidia_module(
        replace(GOOD, nvidia=NvidiaKernelModule("550.54.14", False), nvidia_installed="550.54.14"),
        "pve1",
        HostExpectation(nvidia_driver="570.133.20"),
    )
    assert other.level is Level.FAIL and other.cause is None
    unloaded = nvidia_module(replace(GOOD, nvidia=None), "pve1", HostExpectation(nvidia_driver="570.133.20"))
    assert unloaded.message == "NVIDIA kernel module not loaded, wanted 570.133.20" and unloaded.cause is None


def test_uvm_and_persistenced() -> None:
    f = nvidia_uvm(replace(GOOD, nvidia_devices=("/dev/nvidia0", "/dev/nvidiactl")), "pve1", ALL)
    assert f.level is Level.FAIL and f.message == "/dev/nvidia-uvm is missing"
    for state, words in (("failed", "nvidia-persistenced is failed"), ("", "nvidia-persistenced is not running")):
        p = persistenced(replace(GOOD, persistenced=state), "pve1", ALL)
        assert (p.level, p.message) == (Level.FAIL, words)


@pytest.mark.parametrize(
    "drivers, level, message",
    [
        (("vfio-pci", "vfio-pci"), Level.PASS, "2 GPUs bound to vfio-pci"),
        (("vfio-pci", "nvidia"), Level.FAIL, "1 GPUs not bound to vfio-pci (0000:c1:00.0)"),
        ((None, "nouveau"), Level.FAIL, "2 GPUs not bound to vfio-pci (0000:41:00.0, 0000:c1:00.0)"),
    ],
)
def test_vfio_binding(drivers: tuple[str | None, str | None], level: Level, message: str) -> None:
    f = vfio_bound(replace(GOOD, gpus=(gpu("0000:41:00.0", drivers[0]), gpu("0000:c1:00.0", drivers[1]))), "pve1", ALL)
    assert f is not None and (f.level, f.message) == (level, message)


def test_more_than_three_unbound_gpus_are_cut_with_an_ellipsis() -> None:
    gpus = tuple(gpu(f"0000:{i:02x}:00.0") for i in range(1, 6))
    f = vfio_bound(replace(GOOD, gpus=gpus), "pve1", ALL)
    assert f is not None and f.message == "5 GPUs not bound to vfio-pci (0000:01:00.0, 0000:02:00.0, 0000:03:00.0…)"
    assert vfio_bound(replace(GOOD, gpus=()), "pve1", ALL) is None


def test_only_the_proofs_asked_for_are_made() -> None:
    assert [f.check for f in host_findings(GOOD, "pve1", HostExpectation())] == ["host.iommu_groups"]
    vm = HostExpectation(vfio=True)
    assert [f.check for f in host_findings(GOOD, "pve1", vm)] == ["host.iommu_groups", "host.vfio_bound"]
