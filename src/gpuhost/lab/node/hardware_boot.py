"""What a lab node's kernel sets up at boot for its simulated GPUs, before any service starts.

Run by the node's init (PID 1) inside the node's private mount namespace (the boot script already
did /proc/cpuinfo, /sys/firmware and the boot's kernel log): /sys/kernel/iommu_groups, populated
only when the booted command line leaves the IOMMU on, the simulated GPUs in /sys/bus/pci/devices,
an empty /proc/driver and a private /proc/devices; then what the node's configuration loads at
boot: vfio-pci claims (``options vfio-pci ids=``) and /etc/modules, /etc/modules-load.d. Enabled
units (nvidia-devnodes, nvidia-persistenced) are started afterwards by :mod:`services`.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import time

from gpuhost.lab.node import iommu, iommu_groups
from gpuhost.lab.node.nvidia import kernel
from gpuhost.lab.node.nvidia import paths as kpaths
from gpuhost.lab.node.state import load as load_state

MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 1, 32, 4096, 16384
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
BOOT_LOG = "/var/log/gpuhost-lab/boot.log"


def _mount(source: str, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    rc = _libc.mount(
        source.encode(), target.encode(), fstype.encode() if fstype else None, flags, data.encode() if data else None
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _bind_file(content: str, source: str, target: str) -> None:
    with open(source, "w") as fh:
        fh.write(content)
    _mount(source, target, flags=MS_BIND)


def _overlay_dir(target: str, replace: tuple[str, ...] = ()) -> None:
    """A writable tmpfs over a sysfs directory, with what was there bound back in (except the
    entries in ``replace``, which the simulation provides)."""
    stash = f"{kpaths.KERNEL_RUN}/stash{target.replace('/', '_')}"
    os.makedirs(stash, exist_ok=True)
    entries = [e for e in sorted(os.listdir(target)) if e not in replace]
    _mount(target, stash, flags=MS_BIND | MS_REC)
    _mount("lab-sysfs", target, "tmpfs", 0, "mode=0755,size=4m")
    for name in entries:
        src, dst = f"{stash}/{name}", f"{target}/{name}"
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isdir(src):
            os.mkdir(dst)
            _mount(src, dst, flags=MS_BIND | MS_REC)
        else:
            open(dst, "w").close()
            _mount(src, dst, flags=MS_BIND)


def _write(path: str, content: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(content)


# ---- the pieces ----------------------------------------------------------------------------


def _iommu_groups(enabled: bool, passthrough: bool, hw: dict[str, object]) -> list[str]:
    """The node description's groups (gpuhost.lab.node.iommu_groups) under /sys/kernel/iommu_groups, when the
    booted command line leaves the IOMMU on."""
    base = "/sys/kernel/iommu_groups"
    os.makedirs(base, exist_ok=True)
    lines: list[str] = []
    if not enabled:
        return lines
    gpus: list[dict[str, object]] = list(hw.get("gpus", []))  # type: ignore[call-overload]
    groups = hw.get("iommu_groups")
    if not isinstance(groups, list):  # a description written before the groups were data
        groups = iommu_groups.by_rule(gpus)
    gpu_bdfs = {str(g["bdf"]) for g in gpus}
    for bdf, n in iommu_groups.members(groups):
        d = f"{base}/{n}"
        if not os.path.isdir(d):
            os.makedirs(f"{d}/devices")
            _write(f"{d}/type", "identity\n" if passthrough else "DMA-FQ\n")
            _write(f"{d}/reserved_regions", "0x00000000fee00000 0x00000000feefffff msi\n")
        target = f"/sys/bus/pci/devices/{bdf}" if bdf in gpu_bdfs else f"/sys/devices/pci{bdf[:4]}:{bdf[5:7]}/{bdf}"
        os.symlink(target, f"{d}/devices/{bdf}")
        if bdf in gpu_bdfs:
            os.symlink(d, f"/sys/bus/pci/devices/{bdf}/iommu_group")
        lines.append(f"pci {bdf}: Adding to iommu group {n}")
    return lines


def _pci_devices(gpus: list[dict[str, object]]) -> None:
    speeds = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}
    for g in gpus:
        d = f"/sys/bus/pci/devices/{g['bdf']}"
        os.makedirs(d)
        for name, value in (
            ("vendor", "0x10de"),
            ("device", f"0x{g['device_id']}"),
            ("subsystem_vendor", "0x10de"),
            ("subsystem_device", f"0x{g['subsys_id']}"),
            ("class", f"0x{g['class_code']}00"),
            ("revision", f"0x{g['rev']}"),
            ("numa_node", str(g["numa"])),
            ("local_cpulist", str(g["cpulist"])),
            ("irq", str(g["irq"])),
            ("current_link_speed", speeds[int(str(g["idle_gen"]))]),
            ("max_link_speed", speeds[int(str(g["gen_max"]))]),
            ("current_link_width", str(g["width_max"])),
            ("max_link_width", str(g["width_max"])),
        ):
            _write(f"{d}/{name}", value + "\n")


def _module_lists() -> list[str]:
    names: list[str] = []
    for path in ["/etc/modules"] + sorted(glob.glob("/etc/modules-load.d/*.conf")):
        try:
            text = open(path).read()
        except OSError:
            continue
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith(";"):
                names.append(line.split()[0])
    return names


def vfio_ids() -> set[str]:
    ids: set[str] = set()
    for path in glob.glob("/etc/modprobe.d/*.conf"):
        try:
            text = open(path).read()
        except OSError:
            continue
        for m in re.finditer(r"^\s*options\s+vfio[-_]pci\s+.*\bids=(\S+)", text, re.MULTILINE):
            ids.update(i.lower() for i in m.group(1).split(","))
    return ids


def _bind_vfio(gpus: list[dict[str, object]], wanted_modules: list[str]) -> None:
    mods = {kernel.normalize(m) for m in wanted_modules}
    if "vfio_pci" not in mods:
        return
    ids = vfio_ids()
    for g in gpus:
        if f"10de:{g['device_id']}" in ids:
            kernel.set_binding(str(g["bdf"]), "vfio-pci")


def _log(line: str) -> None:
    os.makedirs(os.path.dirname(BOOT_LOG), exist_ok=True)
    with open(BOOT_LOG, "a") as fh:
        fh.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def boot() -> None:
    st = load_state()
    hw = st.extra.get("gpu") or {}
    gpus: list[dict[str, object]] = list(hw.get("gpus", []))
    os.makedirs(kpaths.KERNEL_RUN, exist_ok=True)
    _write(kpaths.BOOT_TIME, f"{time.time()}\n")
    cmdline = open("/proc/cmdline").read().strip()
    _bind_file(open("/proc/devices").read(), kpaths.PROC_DEVICES_SOURCE, "/proc/devices")
    _mount("lab-driver", kpaths.PROC_DRIVER, "tmpfs", 0, "mode=0755,size=4m")
    _overlay_dir("/sys/kernel", replace=("iommu_groups",))
    _overlay_dir("/sys/bus/pci/devices")
    _pci_devices(gpus)
    io = iommu.state(cmdline.split(), st.cpu)
    group_lines = _iommu_groups(io.enabled, io.passthrough, hw)
    for line in group_lines:
        kernel.log(line)
    wanted = _module_lists()
    _bind_vfio(gpus, wanted)
    for name in wanted:
        try:
            kernel.load(name)
        except (kernel.ModuleError, OSError) as exc:
            kernel.log(
                f"systemd-modules-load[412]: Failed to find module '{name}'"
                if "not found" in str(exc)
                else f"systemd-modules-load[412]: Failed to insert module '{name}': {exc}"
            )


def safe_boot() -> None:
    """Never keep a node from booting: a failure is logged (``/var/log/gpuhost-lab/boot.log``)."""
    try:
        boot()
    except Exception as exc:  # noqa: BLE001 - reported, the node still comes up
        import traceback

        _log(f"hardware boot failed: {exc}\n{traceback.format_exc()}")
