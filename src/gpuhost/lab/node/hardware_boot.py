"""What a lab node's firmware and kernel set up at boot, before any service starts.

Run by the node's init (PID 1) inside the node's private mount namespace: the CPU vendor in
/proc/cpuinfo, /sys/firmware/efi on UEFI (systemd-boot) nodes, /sys/kernel/iommu_groups populated
only when the booted command line leaves the IOMMU on, the simulated GPUs in /sys/bus/pci/devices,
a kernel log (``dmesg``) that matches the command line, an empty /proc/driver and a private
/proc/devices; then what the node's configuration loads at boot: vfio-pci claims
(``options vfio-pci ids=``), /etc/modules and /etc/modules-load.d, and enabled systemd units that
create NVIDIA device nodes (nvidia-modprobe, nvidia-smi, nvidia-persistenced).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import re
import shlex
import subprocess
import time

from gpuhost.lab.node import iommu
from gpuhost.lab.node.nvidia import kernel
from gpuhost.lab.node.nvidia import paths as kpaths
from gpuhost.lab.node.state import load as load_state

MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 1, 32, 4096, 16384
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
BOOT_LOG = "/var/log/gpuhost-lab/boot.log"
DEVICE_TOOLS = ("nvidia-modprobe", "nvidia-smi", "nvidia-persistenced")
IOMMU_GROUP_BASE = 20


def _mount(source: str, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    rc = _libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                     data.encode() if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _bind_file(content: str, source: str, target: str) -> None:
    with open(source, "w") as fh:
        fh.write(content)
    _mount(source, target, flags=MS_BIND)


def _overlay_dir(target: str, keep: bool = True) -> None:
    """A writable tmpfs over a sysfs directory, with what was there bound back in."""
    stash = f"{kpaths.KERNEL_RUN}/stash{target.replace('/', '_')}"
    os.makedirs(stash, exist_ok=True)
    entries = sorted(os.listdir(target)) if keep else []
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

def cpuinfo(real: str, cpu: dict[str, object]) -> str:
    repl = {"vendor_id": cpu.get("vendor_id"), "model name": cpu.get("model_name"), "cpu family": cpu.get("family"),
            "model": cpu.get("model"), "stepping": cpu.get("stepping")}
    out = []
    for line in real.splitlines():
        key = line.split(":", 1)[0].strip() if ":" in line else ""
        if key in repl and repl[key] is not None:
            out.append(f"{line.split(':', 1)[0]}: {repl[key]}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def group_plan(gpus: list[dict[str, object]]) -> list[str]:
    """PCI functions in IOMMU-group order: each root port, switch port and GPU its own group (ACS)."""
    devices: set[str] = set()
    for g in gpus:
        devices.update(str(b) for b in g.get("bridges", []))   # type: ignore[union-attr]
        devices.add(str(g["bdf"]))
    return sorted(devices)


def _iommu_groups(enabled: bool, passthrough: bool, gpus: list[dict[str, object]]) -> list[str]:
    base = "/sys/kernel/iommu_groups"
    os.makedirs(base, exist_ok=True)
    lines: list[str] = []
    if not enabled:
        return lines
    gpu_bdfs = {str(g["bdf"]) for g in gpus}
    for n, bdf in enumerate(group_plan(gpus), start=IOMMU_GROUP_BASE):
        d = f"{base}/{n}"
        os.makedirs(f"{d}/devices")
        _write(f"{d}/type", "identity\n" if passthrough else "DMA-FQ\n")
        _write(f"{d}/reserved_regions", "0x00000000fee00000 0x00000000feefffff msi\n")
        target = f"/sys/bus/pci/devices/{bdf}" if bdf in gpu_bdfs else f"/sys/devices/pci0000:{bdf[5:7]}/{bdf}"
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
        for name, value in (("vendor", "0x10de"), ("device", f"0x{g['device_id']}"), ("subsystem_vendor", "0x10de"),
                            ("subsystem_device", f"0x{g['subsys_id']}"), ("class", f"0x{g['class_code']}00"),
                            ("revision", f"0x{g['rev']}"), ("numa_node", str(g["numa"])),
                            ("local_cpulist", str(g["cpulist"])), ("irq", str(g["irq"])),
                            ("current_link_speed", speeds[int(g["idle_gen"])]),   # type: ignore[arg-type]
                            ("max_link_speed", speeds[int(g["gen_max"])]),        # type: ignore[arg-type]
                            ("current_link_width", str(g["width_max"])), ("max_link_width", str(g["width_max"]))):
            _write(f"{d}/{name}", value + "\n")


def _firmware(efi: bool) -> None:
    _overlay_dir("/sys/firmware")
    if efi:
        for sub in ("efivars", "runtime-map", "mok-variables"):
            os.makedirs(f"/sys/firmware/efi/{sub}")
        _write("/sys/firmware/efi/fw_platform_size", "64\n")
        _write("/sys/firmware/efi/systab", "ACPI20=0x6f3f1000\nACPI=0x6f3f1014\nSMBIOS3=0x6f7e0000\n")


def _dmesg(kernel_release: str, cmdline: str, cpu: str, msgs: list[tuple[float, str]]) -> None:
    upstream = kernel_release.removesuffix("-pve")
    base = [(0.0, f"Linux version {kernel_release} (build@proxmox) (gcc (Debian 12.2.0-14) 12.2.0, GNU ld (GNU "
                  f"Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC PMX {upstream} (2024-11-06T15:04Z) ()"),
            (0.0, f"Command line: {cmdline}"),
            (0.0, "KERNEL supported cpus:"), (0.0, "  Intel GenuineIntel"), (0.0, "  AMD AuthenticAMD"),
            (0.0, "BIOS-provided physical RAM map:"),
            (0.261307, f"Kernel command line: {cmdline}"),
            (0.412000, "Memory: 527895540K/536326060K available"),
            (2.104000, "systemd[1]: Detected architecture x86-64."),
            (2.310000, f"systemd[1]: Hostname set to <{os.uname().nodename}>.")]
    lines = sorted(base + msgs, key=lambda m: m[0])
    _write(kpaths.DMESG, "".join(f"[{t:12.6f}] {m}\n" for t, m in lines))


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


def _enabled_device_units() -> list[tuple[str, list[list[str]]]]:
    """Enabled units under /etc/systemd/system whose ExecStart creates NVIDIA device nodes."""
    units: dict[str, list[list[str]]] = {}
    after: dict[str, str] = {}
    for link in sorted(glob.glob("/etc/systemd/system/*.wants/*.service")):
        name = os.path.basename(link)
        try:
            text = open(os.path.realpath(link)).read()
        except OSError:
            continue
        cmds = []
        for m in re.finditer(r"^\s*ExecStart\s*=\s*(.+)$", text, re.MULTILINE):
            argv = shlex.split(m.group(1).lstrip("-@+!:"))
            if argv and os.path.basename(argv[0]) in DEVICE_TOOLS:
                cmds.append(argv)
        if cmds:
            units[name] = cmds
            after[name] = " ".join(re.findall(r"^\s*After\s*=\s*(.+)$", text, re.MULTILINE))
    order = sorted(units, key=lambda u: (sum(other in after[u] for other in units if other != u), u))
    return [(u, units[u]) for u in order]


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
    cpu_desc = hw.get("cpu") or {}
    if cpu_desc:
        _bind_file(cpuinfo(open("/proc/cpuinfo").read(), cpu_desc), f"{kpaths.KERNEL_RUN}/cpuinfo", "/proc/cpuinfo")
    _bind_file(open("/proc/devices").read(), kpaths.PROC_DEVICES_SOURCE, "/proc/devices")
    _mount("lab-driver", kpaths.PROC_DRIVER, "tmpfs", 0, "mode=0755,size=4m")
    _firmware(st.boot == "systemd-boot")
    _overlay_dir("/sys/kernel")
    _overlay_dir("/sys/bus/pci/devices")
    _pci_devices(gpus)
    io = iommu.state(cmdline.split(), st.cpu)
    group_lines = _iommu_groups(io.enabled, io.passthrough, gpus)
    _dmesg(st.kernel, cmdline, st.cpu, iommu.boot_messages(io, st.cpu, group_lines))
    wanted = _module_lists()
    _bind_vfio(gpus, wanted)
    for name in wanted:
        try:
            kernel.load(name)
        except (kernel.ModuleError, OSError) as exc:
            kernel.log(f"systemd-modules-load[412]: Failed to find module '{name}'" if "not found" in str(exc)
                       else f"systemd-modules-load[412]: Failed to insert module '{name}': {exc}")
    for unit, cmds in _enabled_device_units():
        for argv in cmds:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            _log(f"{unit}: {' '.join(argv)} -> exit {result.returncode} {result.stdout.strip()[-200:]} "
                 f"{result.stderr.strip()[-200:]}")


def safe_boot() -> None:
    """Never keep a node from booting: a failure is logged (``/var/log/gpuhost-lab/boot.log``)."""
    try:
        boot()
    except Exception as exc:  # noqa: BLE001 - reported, the node still comes up
        import traceback
        _log(f"hardware boot failed: {exc}\n{traceback.format_exc()}")


