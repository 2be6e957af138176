"""Everything the host role needs to know about a Proxmox VE node, read in one round trip."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuhost.core.facts import Fact
from gpuhost.facts.batch import ProbeOutput, parse_sections, sections_command
from gpuhost.facts.boot import (
    GRUB_CFG,
    GRUB_DEFAULT,
    GRUB_DROPIN_DIR,
    KERNEL_CMDLINE,
    REFRESH_RECORD,
    BootInfo,
    grub_cfg_tokens,
    grub_effective_sha,
    grub_stale,
    parse_boot_tool_status,
    parse_sha256,
)
from gpuhost.facts.cmdline import parse_kernel_cmdline_file
from gpuhost.facts.driver_failure import ApiMismatch, InitFailure, parse_nvrm_api_mismatch, parse_rm_init_failures
from gpuhost.facts.hardware import (
    IommuState,
    NvidiaKernelModule,
    PciDevice,
    cpu_vendor_name,
    nvidia_gpus,
    parse_device_numbers,
    parse_dmesg_iommu,
    parse_iommu_groups,
    parse_lspci_nn,
    parse_nvidia_version,
    parse_proc_devices,
)
from gpuhost.facts.systemd import AFTER_BOOT

# update-grub's own order: the main file, then every drop-in.
_GRUB_EFFECTIVE = (
    f'. {GRUB_DEFAULT}; for f in {GRUB_DROPIN_DIR}/*.cfg; do [ -e "$f" ] && . "$f"; done; '
    'echo "$GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT"'
)

HOST_PROBES = {
    "cpu": "grep -m1 '^vendor_id' /proc/cpuinfo | cut -d: -f2",
    "kernel": "uname -r",
    "pveversion": "pveversion",
    "pbt": "proxmox-boot-tool status 2>&1",
    "efi": "test -d /sys/firmware/efi",
    "grub_effective": f"test -f {GRUB_DEFAULT} && bash -c '{_GRUB_EFFECTIVE}'",
    "kernel_cmdline": f"cat {KERNEL_CMDLINE}",
    "kernel_cmdline_sha": f"sha256sum {KERNEL_CMDLINE}",
    "grub_cfg": f"grep -E '^[[:space:]]*linux(efi)?[[:space:]]' {GRUB_CFG}",
    "boot_record": f"cat {REFRESH_RECORD}",
    "proc_cmdline": "cat /proc/cmdline",
    "dmesg": "dmesg | grep -E 'iommu: Default domain|AMD-Vi|DMAR|NVRM|D3cold|gsp_'",
    "iommu_groups": "find /sys/kernel/iommu_groups -mindepth 3 -maxdepth 3",
    "lspci": "lspci -nnk -D -d 10de:",
    "modules": "cut -d' ' -f1 /proc/modules",
    "nvidia_version": "cat /proc/driver/nvidia/version",
    "nvidia_installed": "modinfo -F version nvidia",
    "proc_devices": "cat /proc/devices",
    "dev_nvidia": "ls -1d /dev/nvidia* /dev/nvidia-caps/* 2>/dev/null; true",
    "persistenced": "systemctl is-active nvidia-persistenced",
    "dev_numbers": "stat -c '%n %t %T' /dev/nvidia* /dev/nvidia-caps/* /dev/nvidia-caps-imex-channels/* "
    "2>/dev/null; true",
    # the options vfio-pci lines of modprobe.d, each with its file
    "vfio_options": "grep -H '^[[:space:]]*options[[:space:]][[:space:]]*vfio[-_]pci' /etc/modprobe.d/*.conf",
}


@dataclass(frozen=True)
class HostFacts:
    cpu_vendor: str  # 'amd' | 'intel' | 'unknown'
    kernel: str
    pve_version: str | None
    boot: BootInfo
    grub_effective_tokens: tuple[str, ...] | None  # what update-grub would put on the line
    kernel_cmdline_tokens: tuple[str, ...] | None  # /etc/kernel/cmdline
    booted_tokens: tuple[str, ...]  # /proc/cmdline
    iommu: IommuState
    iommu_groups: dict[str, int]
    gpus: tuple[PciDevice, ...]
    modules: frozenset[str]
    nvidia: NvidiaKernelModule | None  # the loaded module
    nvidia_installed: str | None  # the module on disk for the running kernel
    char_majors: dict[str, int]
    nvidia_devices: tuple[str, ...]
    persistenced: str = ""  # systemctl is-active nvidia-persistenced
    device_numbers: dict[str, tuple[int, int]] = field(default_factory=dict)  # node -> (major, minor), by stat
    grub_cfg_tokens: tuple[str, ...] | None = None  # the first linux line of grub.cfg: what GRUB boots
    kernel_cmdline_sha: str | None = None  # sha256 of /etc/kernel/cmdline now
    refreshed_sha: str | None = None  # sha256 of /etc/kernel/cmdline at gpuhost's last refresh
    nvrm_api_mismatch: ApiMismatch | None = None  # dmesg: "NVRM: API mismatch: the client has the version ..."
    rm_init_failures: tuple[InitFailure, ...] = ()  # dmesg: "NVRM: GPU <bdf>: RmInitAdapter failed! (...)"
    #: vendor:device -> the /etc/modprobe.d file whose ``options vfio-pci ids=`` binds it at boot
    vfio_ids: dict[str, str] = field(default_factory=dict)

    @property
    def configured_tokens(self) -> tuple[str, ...] | None:
        """The command line the boot loader will use at the next boot (after its refresh)."""
        if self.boot.loader == "systemd-boot":
            return self.kernel_cmdline_tokens
        return self.grub_effective_tokens

    @property
    def loader_tokens(self) -> tuple[str, ...] | None:
        """The command line the boot loader really boots next, as it stands now (None: not known to match)."""
        if self.boot.loader == "systemd-boot":
            fresh = self.kernel_cmdline_sha is not None and self.kernel_cmdline_sha == self.refreshed_sha
            return self.kernel_cmdline_tokens if fresh else None
        if self.boot.loader == "grub-pbt":
            return self.grub_effective_tokens if self._grub_pbt_refreshed else None
        return self.grub_cfg_tokens

    @property
    def _grub_pbt_refreshed(self) -> bool:
        tokens = self.grub_effective_tokens
        return tokens is not None and self.refreshed_sha == grub_effective_sha(tokens)

    @property
    def refresh_needed(self) -> str | None:
        """Why the boot loader would not boot what its source file says (None: it would)."""
        if self.boot.loader == "systemd-boot":
            if self.kernel_cmdline_sha is None:
                return None
            if self.refreshed_sha is None:
                return f"no record of a proxmox-boot-tool refresh of {KERNEL_CMDLINE} as it is now"
            if self.refreshed_sha != self.kernel_cmdline_sha:
                return f"{KERNEL_CMDLINE} changed since the last proxmox-boot-tool refresh"
            return None
        if self.grub_effective_tokens is None:
            return None
        if self.boot.loader == "grub-pbt":
            # GRUB boots the ESPs' grub.cfg, which 'proxmox-boot-tool refresh' regenerates with the ESP on
            # /boot (proxmox-kernel-helper zz-proxmox-boot:105-110); the root file system's
            # /boot/grub/grub.cfg "is NOT read when booting from those disk!" (000_proxmox_boot_header),
            # and the ESPs stay unmounted: gpuhost judges by its record of the last refresh it ran.
            if self.refreshed_sha is None:
                return "no record of a proxmox-boot-tool refresh of the GRUB defaults as they are now"
            if not self._grub_pbt_refreshed:
                return f"{GRUB_DEFAULT} changed since the last proxmox-boot-tool refresh"
            return None
        return grub_stale(self.grub_effective_tokens, self.grub_cfg_tokens)


def parse_vfio_ids(text: str) -> dict[str, str]:
    """vendor:device -> the file whose ``options vfio-pci ids=`` line names it (the ``vfio_options`` probe)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        path, _, rest = line.partition(":")
        m = re.search(r"\bids=(\S+)", rest.split("#", 1)[0])
        for dev_id in m.group(1).split(",") if m else ():
            out.setdefault(dev_id.lower(), path)
    return out


def host_facts_from(s: Mapping[str, ProbeOutput]) -> HostFacts:
    """Parse the sections of :data:`HOST_PROBES` (callers may batch more probes into the same trip)."""

    def out(key: str) -> str:
        return s[key].output if key in s and s[key].ok else ""

    pbt = s.get("pbt")
    boot = parse_boot_tool_status(pbt.output if pbt else "", pbt.status if pbt else 127, s["efi"].ok)
    return HostFacts(
        cpu_vendor=cpu_vendor_name(out("cpu")),
        kernel=out("kernel").strip(),
        pve_version=out("pveversion").strip() or None,
        boot=boot,
        grub_effective_tokens=tuple(out("grub_effective").split()) if s["grub_effective"].ok else None,
        kernel_cmdline_tokens=(
            tuple(parse_kernel_cmdline_file(out("kernel_cmdline"))) if s["kernel_cmdline"].ok else None
        ),
        booted_tokens=tuple(out("proc_cmdline").split()),
        iommu=parse_dmesg_iommu(out("dmesg")),
        nvrm_api_mismatch=parse_nvrm_api_mismatch(out("dmesg")),
        rm_init_failures=tuple(parse_rm_init_failures(out("dmesg"))),
        iommu_groups=parse_iommu_groups(out("iommu_groups")),
        gpus=tuple(nvidia_gpus(parse_lspci_nn(out("lspci")))),
        modules=frozenset(out("modules").split()),
        nvidia=parse_nvidia_version(out("nvidia_version")),
        nvidia_installed=out("nvidia_installed").strip() or None,
        char_majors=parse_proc_devices(out("proc_devices")),
        nvidia_devices=tuple(out("dev_nvidia").split()),
        persistenced=(s["persistenced"].output.strip() if "persistenced" in s else ""),
        device_numbers=parse_device_numbers(out("dev_numbers")),
        grub_cfg_tokens=grub_cfg_tokens(out("grub_cfg")) if "grub_cfg" in s and s["grub_cfg"].ok else None,
        kernel_cmdline_sha=parse_sha256(out("kernel_cmdline_sha")),
        refreshed_sha=parse_sha256(out("boot_record")),
        vfio_ids=parse_vfio_ids(out("vfio_options")),
    )


host_facts: Fact[HostFacts] = Fact(
    "host facts",
    lambda: f"{AFTER_BOOT}\n{sections_command(HOST_PROBES)}",
    lambda result: host_facts_from(parse_sections(result.stdout)),
)
"""Everything the host role needs, in one round trip (:data:`HOST_PROBES`), read once systemd finished starting
the node: right after a reboot SSH answers while boot units (nvidia-devnodes, nvidia-persistenced, pve-guests)
still run, and a re-run would judge devices and services that are still coming up."""
