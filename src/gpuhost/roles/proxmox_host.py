"""Role ``proxmox_host``: IOMMU on the kernel command line, the VM or LXC GPU path, a safe reboot, proof.

Variables (defaults below; set them in the inventory, the play or with ``-e``):

``iommu_vendor_token``  add ``amd_iommu=on`` / ``intel_iommu=on`` by CPU vendor, as users expect.
                        Current kernels ignore ``amd_iommu=on`` (dmesg: ``AMD-Vi: Unknown option - 'on'``)
                        and enable the AMD IOMMU by default; ``iommu=pt`` is the token that matters.
``cmdline_extra``       more tokens, e.g. ``[pcie_aspm=off, pcie_port_pm=off]``.
``grub_dropin``         on GRUB hosts, write ``/etc/default/grub.d/90-gpuhost.cfg`` instead of editing
                        ``/etc/default/grub``.
``gpu_path``            ``lxc`` (host NVIDIA driver, containers share it), ``vm`` (vfio-pci) or ``none``.
``vfio_ids``            vendor:device ids for vfio-pci; default: those of the host's NVIDIA GPUs.
``nvidia_driver``       for the LXC path: ``{version, url, sha256, kernel_open}`` of NVIDIA's ``.run``
                        (open kernel modules by default: Blackwell needs them).
``uvm_disable_hmm``     write ``options nvidia_uvm uvm_disable_hmm=1`` (RTX PRO 6000 NCCL lock-ups).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuhost.errors import OperationFailed
from gpuhost.facts.host import host_facts
from gpuhost.operations.boot import BootRefresh, KernelCmdline
from gpuhost.operations.command import Command
from gpuhost.operations.files import Copy
from gpuhost.operations.host_checks import RebootIfNeeded, VerifyHost
from gpuhost.operations.modules import ModuleList
from gpuhost.operations.nvidia import NvidiaDriver
from gpuhost.operations.apt import Apt
from gpuhost.operations.files import Template
from gpuhost.operations.systemd import Systemd
from gpuhost.playbook.task import FLUSH_HANDLERS, Task, role_task
from gpuhost.roles import Role, register_role

if TYPE_CHECKING:
    from gpuhost.runner.context import HostContext

REFRESH = "refresh boot loader"
INITRAMFS = "update initramfs"
VFIO_MODULES = ["vfio", "vfio_iommu_type1", "vfio_pci"]  # vfio_virqfd is part of vfio since 6.2
VFIO_CONF = "/etc/modprobe.d/gpuhost-vfio.conf"


def cmdline_tokens(cpu_vendor: str, variables: dict[str, Any]) -> list[str]:
    tokens = ["iommu=pt"]
    if variables.get("iommu_vendor_token", True):
        if cpu_vendor == "amd":
            tokens.append("amd_iommu=on")
        elif cpu_vendor == "intel":
            tokens.append("intel_iommu=on")
    tokens += [str(t) for t in variables.get("cmdline_extra") or []]
    return tokens


def vfio_conf(ids: list[str]) -> str:
    return ("# Managed by gpuhost: GPUs for VMs are bound to vfio-pci before any GPU driver.\n"
            f"options vfio-pci ids={','.join(ids)}\n"
            "softdep nouveau pre: vfio-pci\n"
            "softdep nvidia pre: vfio-pci\n"
            "blacklist nouveau\n"
            "options nouveau modeset=0\n")


def lxc_driver_tasks(v: dict[str, Any], kernel: str) -> tuple[list[Task], str]:
    """The host NVIDIA driver that LXC guests share, with its device nodes guaranteed at boot."""
    pin = v.get("nvidia_driver")
    if not isinstance(pin, dict):
        raise OperationFailed("gpu_path is lxc, so the host needs an NVIDIA driver: set nvidia_driver "
                              "{version, url, sha256} in the inventory vars (or gpu_path: vm / none)")
    driver = NvidiaDriver.from_dict({**pin, "target": "host"})
    tasks = [
        role_task("kernel headers and dkms before the driver",
                  Apt.from_dict({"packages": ["dkms", "proxmox-default-headers", f"proxmox-headers-{kernel}"]}),
                  tags=("driver",)),
        role_task(f"NVIDIA driver {driver.args.version} (DKMS)", driver, tags=("driver",)),
        role_task("/dev/nvidia-uvm now (the boot unit keeps it after reboots)",
                  Command.from_dict({"cmd": "nvidia-modprobe -c0 -u",
                                     "creates": "/dev/nvidia-uvm",
                                     "unless": "! test -e /proc/driver/nvidia/version"}), tags=("driver",)),
        role_task("nvidia and nvidia_uvm load at boot",
                  ModuleList.from_dict({"path": "/etc/modules-load.d/nvidia.conf",
                                        "modules": ["nvidia", "nvidia_uvm"]}), tags=("driver",)),
    ]
    if v.get("uvm_disable_hmm"):
        tasks.append(role_task("nvidia_uvm without HMM", Copy.from_dict({
            "dest": "/etc/modprobe.d/nvidia-uvm.conf", "content": "options nvidia_uvm uvm_disable_hmm=1\n",
            "mode": "0644"}), tags=("driver",)))
    for unit in ("nvidia-devnodes.service", "nvidia-persistenced.service"):
        tasks += [
            role_task(f"{unit} unit", Template.from_dict({"src": f"{unit}.j2",
                                                          "dest": f"/etc/systemd/system/{unit}",
                                                          "mode": "0644"}), tags=("driver",)),
            role_task(f"{unit} enabled", Systemd.from_dict({"unit": unit, "enabled": True}), tags=("driver",)),
        ]
    return tasks, driver.args.version


@register_role
class ProxmoxHost(Role):
    name = "proxmox_host"
    defaults = {"iommu_vendor_token": True, "cmdline_extra": [], "grub_dropin": False, "gpu_path": "lxc",
                "vfio_ids": None, "nvidia_driver": None, "uvm_disable_hmm": False}

    def tasks(self, host: HostContext) -> list[Task]:
        v = host.vars
        facts = host.fact(host_facts)
        tokens = cmdline_tokens(facts.cpu_vendor, v)
        path = v.get("gpu_path", "lxc")
        if path not in ("lxc", "vm", "none"):
            raise OperationFailed(f"gpu_path must be lxc, vm or none (got {path!r})")
        tasks = [role_task("IOMMU on the kernel command line",
                           KernelCmdline.from_dict({"present": tokens, "grub_dropin": bool(v.get("grub_dropin"))}),
                           notify=(REFRESH,), tags=("cmdline",))]
        if path == "vm":
            ids = v.get("vfio_ids") or sorted({f"{g.vendor}:{g.device}" for g in facts.gpus})
            if not ids:
                raise OperationFailed("gpu_path is vm but no NVIDIA GPU was found (lspci -nn -d 10de:) "
                                      "and vfio_ids is not set")
            tasks += [
                role_task("vfio modules at boot", ModuleList.from_dict({"modules": VFIO_MODULES}),
                          notify=(INITRAMFS,), tags=("vfio",)),
                role_task("vfio-pci claims the GPUs, nouveau stays away",
                          Copy.from_dict({"dest": VFIO_CONF, "content": vfio_conf(ids), "mode": "0644"}),
                          notify=(INITRAMFS,), tags=("vfio",)),
            ]
        driver: str | None = None
        if path == "lxc":
            driver_tasks, driver = lxc_driver_tasks(v, facts.kernel)
            tasks += driver_tasks
        tasks += [
            FLUSH_HANDLERS,
            role_task("reboot if the running kernel lags its configuration",
                      RebootIfNeeded.from_dict({"cmdline": tokens, "nvidia_driver": driver}), tags=("reboot",)),
            role_task("verify the booted host",
                      VerifyHost.from_dict({"cmdline": tokens, "nvidia_driver": driver,
                                            "nvidia_uvm": path == "lxc", "vfio": path == "vm"}),
                      tags=("verify",)),
        ]
        return tasks

    def handlers(self) -> list[Task]:
        return [
            role_task(REFRESH, BootRefresh.from_dict({})),
            role_task(INITRAMFS, Command.from_dict({"cmd": "update-initramfs -u -k all"})),
        ]
