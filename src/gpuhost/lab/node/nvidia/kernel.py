"""The node's simulated kernel modules: files on disk, what is loaded, and what loading does.

A module "on disk" is a small text file ``/lib/modules/<kernel>/.../<name>.ko`` with ``key=value``
lines (name, version, flavour, ...), found the way depmod orders them (``updates/`` first).
Loading ``nvidia`` publishes ``/proc/driver/nvidia`` and its char majors in ``/proc/devices``;
device nodes appear only when a client creates them (nvidia-modprobe, nvidia-smi, the installer),
as with NVIDIA's ``.run`` driver, which installs no udev rules.
"""

from __future__ import annotations

import json
import os
import time

from . import paths
from .gpus import Gpu, node_gpus

MODULE_DEPS = {
    "nvidia_uvm": ["nvidia"],
    "nvidia_modeset": ["nvidia"],
    "nvidia_drm": ["nvidia_modeset"],
    "nvidia_peermem": ["nvidia"],
    "vfio_pci": ["vfio_pci_core"],
    "vfio_pci_core": ["vfio"],
    "vfio_iommu_type1": ["vfio"],
}
BUILD_HOST = "dvs-builder@U22-I3-AM02-24-3"
BUILD_DATES = {"580.95.05": "Thu Sep 25 03:21:44 UTC 2025", "580.105.08": "Wed Oct 29 21:11:40 UTC 2025"}
GCC_LINE = "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) "


class ModuleError(Exception):
    """What ``modprobe`` prints, e.g. ``FATAL: Module foo not found in directory ...``."""


def normalize(name: str) -> str:
    return name.replace("-", "_")


def node_kernel() -> str:
    with open(paths.NODE_STATE) as fh:
        return str(json.load(fh)["kernel"])


def module_file(name: str, kernel: str | None = None) -> str | None:
    """The file modprobe would load for ``name`` (``updates/`` wins over ``kernel/``)."""
    kernel = kernel or node_kernel()
    base = f"/lib/modules/{kernel}"
    wanted = normalize(name)
    found: list[tuple[int, str]] = []
    for dirpath, _, files in os.walk(base):
        for f in files:
            if f.endswith(".ko") and normalize(f[:-3]) == wanted:
                rel = os.path.relpath(dirpath, base)
                found.append((0 if rel.startswith("updates") else 1, os.path.join(dirpath, f)))
    return sorted(found)[0][1] if found else None


def read_module_info(path: str) -> dict[str, str]:
    info: dict[str, str] = {"filename": path}
    with open(path, errors="replace") as fh:
        for line in fh:
            if "=" in line and not line.startswith("#"):
                key, value = line.rstrip("\n").split("=", 1)
                info[key] = value
    return info


def render_module_file(name: str, version: str, kernel: str, **fields: str) -> str:
    lines = [
        "# gpuhost lab: a simulated kernel module (read by the lab's modinfo and modprobe)",
        f"name={name}",
        f"version={version}",
        f"vermagic={kernel} SMP preempt mod_unload modversions ",
    ]
    lines += [f"{k}={v}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"


# ---- loaded modules (per boot) -------------------------------------------------------------


def loaded() -> dict[str, dict[str, str]]:
    try:
        with open(paths.LOADED_MODULES) as fh:
            mods: dict[str, dict[str, str]] = json.load(fh)
            return mods
    except (OSError, ValueError):
        return {}


def _save_loaded(mods: dict[str, dict[str, str]]) -> None:
    os.makedirs(paths.KERNEL_RUN, exist_ok=True)
    tmp = paths.LOADED_MODULES + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(mods, fh, indent=1, sort_keys=True)
    os.replace(tmp, paths.LOADED_MODULES)


def log(message: str) -> None:
    """Append to the kernel ring buffer (``dmesg``), stamped with seconds since this boot."""
    try:
        with open(paths.BOOT_TIME) as fh:
            booted = float(fh.read().strip())
    except (OSError, ValueError):
        booted = time.time()
    stamp = max(0.0, time.time() - booted) + 8.0
    with open(paths.DMESG, "a") as fh:
        for line in message.splitlines():
            fh.write(f"[{stamp:12.6f}] {line}\n")


def load(name: str) -> list[str]:
    """modprobe: load ``name`` and what it depends on; returns the modules newly loaded."""
    name = normalize(name)
    mods = loaded()
    if name in mods:
        return []
    done: list[str] = []
    for dep in MODULE_DEPS.get(name, []):
        done += load(dep)
        mods = loaded()
    path = module_file(name)
    if path is None:
        raise ModuleError(f"FATAL: Module {name} not found in directory /lib/modules/{node_kernel()}")
    info = read_module_info(path)
    if name == "nvidia":
        _load_nvidia(info)
    elif name == "nvidia_uvm":
        register_chrdev("nvidia-uvm", extended=True)
        log(f"nvidia-uvm: Loaded the UVM driver, major device number {char_majors()['nvidia-uvm']}.")
    elif name == "nvidia_modeset":
        log(
            f"nvidia-modeset: Loading NVIDIA UNIX Open Kernel Mode Setting Driver for x86_64  {info.get('version')}  "
            f"Release Build  ({BUILD_HOST})  {BUILD_DATES.get(info.get('version', ''), '')}"
        )
    mods = loaded()
    mods[name] = {"version": info.get("version", ""), "flavour": info.get("flavour", ""), "file": path}
    _save_loaded(mods)
    return done + [name]


def unload(name: str) -> None:
    name = normalize(name)
    mods = loaded()
    if name not in mods:
        return
    users = [m for m, deps in MODULE_DEPS.items() if name in deps and m in mods]
    if users:
        raise ModuleError(f"FATAL: Module {name} is in use.")
    if name == "nvidia":
        _remove_tree(paths.PROC_NVIDIA)
        for dev in ("nvidia", "nvidiactl", "nvidia-caps", "nvidia-nvlink", "nvidia-nvswitch"):
            unregister_chrdev(dev)
    elif name == "nvidia_uvm":
        unregister_chrdev("nvidia-uvm")
    del mods[name]
    _save_loaded(mods)


def _remove_tree(path: str) -> None:
    for dirpath, dirs, files in os.walk(path, topdown=False):
        for f in files:
            os.unlink(os.path.join(dirpath, f))
        for d in dirs:
            os.rmdir(os.path.join(dirpath, d))
    if os.path.isdir(path):
        os.rmdir(path)


def bindings() -> dict[str, str]:
    """PCI function → the driver that claimed it at boot (``vfio-pci`` for GPUs set aside for VMs)."""
    try:
        with open(f"{paths.KERNEL_RUN}/bindings.json") as fh:
            bound: dict[str, str] = json.load(fh)
            return bound
    except (OSError, ValueError):
        return {}


def set_binding(bdf: str, driver: str | None) -> None:
    current = bindings()
    if driver is None:
        current.pop(bdf, None)
    else:
        current[bdf] = driver
    os.makedirs(paths.KERNEL_RUN, exist_ok=True)
    with open(f"{paths.KERNEL_RUN}/bindings.json", "w") as fh:
        json.dump(current, fh, sort_keys=True)


def version_text(version: str, flavour: str) -> str:
    date = BUILD_DATES.get(version, "Thu Sep 25 03:21:44 UTC 2025")
    if flavour == "open":
        first = (
            f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  ({BUILD_HOST})  {date}"
        )
    else:
        first = f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  {date}"
    return f"{first}\n{GCC_LINE}\n"


def information_text(gpu: Gpu, version: str) -> str:
    return (
        f"Model: \t\t {gpu.name}\nIRQ:   \t\t {gpu.irq}\nGPU UUID: \t {gpu.uuid}\n"
        f"Video BIOS: \t {gpu.vbios}\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
        f"Bus Location: \t {gpu.bdf}\nDevice Minor: \t {gpu.index}\nGPU Firmware: \t {version}\n"
        "GPU Excluded:\t No\n"
    )


def _load_nvidia(info: dict[str, str]) -> None:
    version, flavour = info.get("version", ""), info.get("flavour", "open")
    bound = bindings()
    gpus: list[Gpu] = []
    for gpu in node_gpus():
        if bound.get(gpu.bdf, "nvidia") != "nvidia":
            continue
        if gpu.needs_open_module and flavour != "open":
            log(
                f"NVRM: The NVIDIA GPU {gpu.bdf} (PCI ID: 10de:{gpu.device_id})\n"
                "NVRM: installed in this system requires use of the NVIDIA open kernel modules."
            )
            continue
        gpus.append(gpu)
    if not gpus:
        log("NVRM: No NVIDIA devices probed.")
        raise ModuleError("ERROR: could not insert 'nvidia': No such device")
    os.makedirs(f"{paths.PROC_NVIDIA}/gpus", exist_ok=True)
    with open(f"{paths.PROC_NVIDIA}/version", "w") as fh:
        fh.write(version_text(version, flavour))
    with open(f"{paths.PROC_NVIDIA}/params", "w") as fh:
        fh.write(
            "ResmanDebugLevel: 4294967295\nRmLogonRC: 1\nModifyDeviceFiles: 1\nDeviceFileUID: 0\n"
            "DeviceFileGID: 0\nDeviceFileMode: 438\nInitializeSystemMemoryAllocations: 1\n"
            "UsePageAttributeTable: 4294967295\nEnableMSI: 1\nEnablePCIeGen3: 0\nMemoryPoolSize: 0\n"
            "KMallocHeapMaxSize: 0\nVMallocHeapMaxSize: 0\nIgnoreMMIOCheck: 0\nEnableStreamMemOPs: 0\n"
            "EnableUserNUMAManagement: 1\nNvLinkDisable: 0\nRmProfilingAdminOnly: 1\n"
            "PreserveVideoMemoryAllocations: 0\nEnableS0ixPowerManagement: 0\nDynamicPowerManagement: 3\n"
            "RegisterPCIDriver: 1\nEnablePCIERelaxedOrderingMode: 0\nEnableResizableBar: 0\n"
            "EnableGpuFirmware: 18\nEnableDbgBreakpoint: 0\nOpenRmEnableUnsupportedGpus: 1\n"
            "DmaRemapPeerMmio: 1\nImexChannelCount: 2048\nCreateImexChannel0: 0\nGrdmaPciTopoCheckOverride: 0\n"
            'RegistryDwords: ""\nRegistryDwordsPerDevice: ""\nRmMsg: ""\nGpuBlacklist: ""\n'
            'TemporaryFilePath: ""\nExcludedGpus: ""\n'
        )
    open(f"{paths.PROC_NVIDIA}/registry", "w").close()
    for gpu in gpus:
        d = f"{paths.PROC_NVIDIA}/gpus/{gpu.bdf}"
        os.makedirs(d, exist_ok=True)
        with open(f"{d}/information", "w") as fh:
            fh.write(information_text(gpu, version))
        data = {k: getattr(gpu, k) for k in gpu.__dataclass_fields__ if k != "extra"}
        with open(f"{d}/{paths.LAB_GPU_FILE}", "w") as fh:
            json.dump({**data, **gpu.extra}, fh)
    register_chrdev("nvidia", major=paths.NVIDIA_MAJOR)
    register_chrdev("nvidiactl", major=paths.NVIDIA_MAJOR)
    register_chrdev("nvidia-caps")
    kind = "Open " if flavour == "open" else ""
    log(
        f"nvidia: loading out-of-tree module taints kernel.\n"
        f"NVRM: loading NVIDIA UNIX {kind}Kernel Module for x86_64  {version}  Release Build  ({BUILD_HOST})  "
        f"{BUILD_DATES.get(version, '')}"
    )


# ---- /proc/devices -------------------------------------------------------------------------


def _read_devices() -> list[str]:
    try:
        with open(paths.PROC_DEVICES_SOURCE) as fh:
            return fh.read().splitlines()
    except OSError:
        return ["Character devices:", "", "Block devices:"]


def char_majors() -> dict[str, int]:
    out: dict[str, int] = {}
    section = ""
    for line in _read_devices():
        if line.endswith("devices:"):
            section = line
            continue
        parts = line.split()
        if section.startswith("Character") and len(parts) == 2 and parts[0].isdigit():
            out.setdefault(parts[1], int(parts[0]))
    return out


def register_chrdev(name: str, major: int | None = None, extended: bool = False) -> int:
    """Add ``name`` to the character section of /proc/devices (a free dynamic major unless given),
    rewriting the bound file in place (a rename would break the bind mount)."""
    lines = _read_devices()
    start = lines.index("Character devices:") if "Character devices:" in lines else 0
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    entries = [(int(p[0]), p[1]) for p in (line.split() for line in lines[start + 1 : end]) if len(p) == 2]
    for m, n in entries:
        if n == name:
            return m
    used = {m for m, _ in entries}
    if major is None:
        candidates = list(range(511, 383, -1)) if extended else list(range(254, 233, -1)) + list(range(511, 383, -1))
        major = next(m for m in candidates if m not in used)
    entries.append((major, name))
    entries.sort(key=lambda e: e[0])
    new = lines[: start + 1] + [f"{m:3d} {n}" for m, n in entries] + lines[end:]
    with open(paths.PROC_DEVICES_SOURCE, "r+") as fh:
        fh.seek(0)
        fh.write("\n".join(new) + "\n")
        fh.truncate()
    return major


def unregister_chrdev(name: str) -> None:
    lines = _read_devices()
    new = [
        line for line in lines if not (len(line.split()) == 2 and line.split()[1] == name and line.split()[0].isdigit())
    ]
    if new != lines:
        with open(paths.PROC_DEVICES_SOURCE, "r+") as fh:
            fh.seek(0)
            fh.write("\n".join(new) + "\n")
            fh.truncate()


# ---- device nodes (what nvidia-modprobe does) ----------------------------------------------


def _mknod(path: str, major: int, minor: int) -> None:
    import stat as st

    if os.path.exists(path):
        return
    os.mknod(path, 0o666 | st.S_IFCHR, os.makedev(major, minor))
    os.chmod(path, 0o666)


def create_gpu_nodes(minors: list[int] | None = None) -> None:
    """``/dev/nvidiactl`` and ``/dev/nvidiaN`` for the bound GPUs (all, or those given)."""
    from .gpus import driver_gpus

    bound = [g.index for g in driver_gpus()]
    _mknod("/dev/nvidiactl", paths.NVIDIA_MAJOR, paths.CTL_MINOR)
    for minor in bound if minors is None else [m for m in minors if m in bound]:
        _mknod(f"/dev/nvidia{minor}", paths.NVIDIA_MAJOR, minor)


def create_uvm_nodes() -> None:
    major = char_majors().get("nvidia-uvm")
    if major is None:
        raise ModuleError("nvidia-uvm is not loaded")
    _mknod("/dev/nvidia-uvm", major, 0)
    _mknod("/dev/nvidia-uvm-tools", major, 1)


def on_node() -> bool:
    """True on a lab node (its kernel is ours to drive); False inside a container."""
    return os.path.exists(paths.NODE_STATE) and os.path.exists(paths.PROC_DEVICES_SOURCE)
