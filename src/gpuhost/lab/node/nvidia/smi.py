"""``nvidia-smi``: answers from the simulated driver's state in NVIDIA's formats and exit codes."""

from __future__ import annotations

import os
import sys
import time

from . import kernel, load, topo
from .gpus import (
    Gpu,
    driver_gpus,
    has_control_device,
    loaded_module_version,
    persistence_enabled,
    visible_minors,
)

COMM_FAIL = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
    "latest NVIDIA driver is installed and running."
)
RC_INVALID, RC_NO_DEVICES, RC_NO_DRIVER, RC_MISMATCH = 2, 6, 9, 18


class SmiExit(Exception):
    def __init__(self, text: str, code: int, stream: str = "out") -> None:
        super().__init__(text)
        self.text, self.code, self.stream = text, code, stream


def cuda_version(driver: str) -> str:
    major = int(driver.split(".")[0])
    return {580: "13.0", 575: "12.9", 570: "12.8", 565: "12.7", 560: "12.6", 555: "12.5", 550: "12.4"}.get(
        major, "13.0"
    )


def nvml_version(driver: str) -> str:
    """How the mismatch message names the library (major.minor, as real captures show)."""
    return ".".join(driver.split(".")[:2])


def init(version: str) -> list[Gpu]:
    """nvmlInit and device enumeration: the GPUs this process can reach, or the real failure."""
    module = loaded_module_version()
    if module is None:
        raise SmiExit(COMM_FAIL, RC_NO_DRIVER)
    if module != version:
        raise SmiExit(
            f"Failed to initialize NVML: Driver/library version mismatch\n"
            f"NVML library version: {nvml_version(version)}",
            RC_MISMATCH,
        )
    if kernel.on_node() and os.geteuid() == 0:
        kernel.create_gpu_nodes()  # NVML runs nvidia-modprobe for missing nodes on the host
    if not has_control_device():
        raise SmiExit(COMM_FAIL, RC_NO_DRIVER)
    minors = visible_minors()
    gpus = [g for g in driver_gpus() if g.index in minors]
    if not gpus:
        raise SmiExit("No devices were found", RC_NO_DEVICES)
    return gpus


# ---- --query-gpu ---------------------------------------------------------------------------


def _fields(gpu: Gpu, position: int, count: int, driver: str) -> dict[str, tuple[str, str]]:
    """field → (value, unit)."""
    busy = load.current(gpu)
    used = round(gpu.memory_mib * busy.memory_fraction)
    reserved = 530 if gpu.memory_mib > 40000 else 250
    persistence = "Enabled" if persistence_enabled() else "Disabled"
    gen_now = gpu.idle_gen
    return {
        "index": (str(position), ""),
        "count": (str(count), ""),
        "name": (gpu.name, ""),
        "gpu_name": (gpu.name, ""),
        "uuid": (gpu.uuid, ""),
        "gpu_uuid": (gpu.uuid, ""),
        "serial": (gpu.serial, ""),
        "gpu_serial": (gpu.serial, ""),
        "pci.bus_id": (gpu.nvml_bus_id, ""),
        "gpu_bus_id": (gpu.nvml_bus_id, ""),
        "pci.domain": ("0x0000", ""),
        "pci.bus": (f"0x{gpu.bdf.split(':')[1].upper()}", ""),
        "pci.device": ("0x00", ""),
        "pci.device_id": (f"0x{gpu.device_id.upper()}10DE", ""),
        "pci.sub_device_id": (f"0x{gpu.subsys_id.upper()}10DE", ""),
        "driver_version": (driver, ""),
        "vbios_version": (gpu.vbios, ""),
        "persistence_mode": (persistence, ""),
        "compute_cap": (gpu.compute_cap, ""),
        "compute_mode": ("Default", ""),
        "display_mode": ("Disabled", ""),
        "display_active": ("Disabled", ""),
        "memory.total": (str(gpu.memory_mib), "MiB"),
        "memory.used": (str(used), "MiB"),
        "memory.reserved": (str(reserved), "MiB"),
        "memory.free": (str(gpu.memory_mib - used - reserved), "MiB"),
        "pcie.link.gen.current": (str(gen_now), ""),
        "pcie.link.gen.gpucurrent": (str(gen_now), ""),
        "pcie.link.gen.max": (str(gpu.gen_max), ""),
        "pcie.link.gen.gpumax": (str(gpu.gen_max), ""),
        "pcie.link.gen.hostmax": (str(gpu.gen_max), ""),
        "pcie.link.width.current": (str(gpu.width_max), ""),
        "pcie.link.width.max": (str(gpu.width_max), ""),
        "temperature.gpu": ("31", ""),
        "fan.speed": ("[N/A]", "%"),
        "utilization.gpu": (str(load.utilization(busy)), "%"),
        "utilization.memory": (str(load.utilization(busy) // 2), "%"),
        "power.draw": (f"{load.power(gpu, busy):.2f}", "W"),
        "power.limit": (f"{gpu.power_limit_w:.2f}", "W"),
        "pstate": ("P1" if busy.inflight else ("P2" if used else "P8"), ""),
        "clocks.sm": ("180", "MHz"),
        "clocks.mem": ("405", "MHz"),
        "clocks.max.sm": ("3090", "MHz"),
        "mig.mode.current": ("Disabled", ""),
        "ecc.mode.current": ("Enabled", ""),
        "timestamp": (time.strftime("%Y/%m/%d %H:%M:%S.000"), ""),
    }


_UNIT_HEADER = {"MiB": "MiB", "%": "%", "W": "W", "MHz": "MHz"}


def query(gpus: list[Gpu], fields: list[str], fmt: list[str], driver: str) -> str:
    if not fmt or fmt[0] != "csv":
        raise SmiExit('"--format" is required with "--query-gpu"; use --format=csv', RC_INVALID)
    noheader, nounits = "noheader" in fmt, "nounits" in fmt
    probe = _fields(gpus[0], 0, len(gpus), driver)
    for f in fields:
        if f not in probe:
            raise SmiExit(f'Field "{f}" is not a valid field to query.\n', RC_INVALID)
    lines = []
    if not noheader:
        lines.append(", ".join(f"{f} [{probe[f][1]}]" if probe[f][1] else f for f in fields))
    for pos, gpu in enumerate(gpus):
        vals = _fields(gpu, pos, len(gpus), driver)
        cells = []
        for f in fields:
            value, unit = vals[f]
            cells.append(value if nounits or not unit or value.startswith("[") else f"{value} {unit}")
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"


# ---- -L, -q, the summary table -------------------------------------------------------------


def list_gpus(gpus: list[Gpu]) -> str:
    return "".join(f"GPU {i}: {g.name} (UUID: {g.uuid})\n" for i, g in enumerate(gpus))


def full_query(gpus: list[Gpu], driver: str) -> str:
    out = [
        "",
        "==============NVSMI LOG==============",
        "",
        f"Timestamp                                              : {time.strftime('%a %b %d %H:%M:%S %Y')}",
        f"Driver Version                                         : {driver}",
        f"CUDA Version                                           : {cuda_version(driver)}",
        "",
        f"Attached GPUs                                          : {len(gpus)}",
    ]
    pm = "Enabled" if persistence_enabled() else "Disabled"
    for g in gpus:
        bus = g.bdf.split(":")[1].upper()
        out += [
            f"GPU {g.nvml_bus_id}",
            f"    Product Name                                       : {g.name}",
            "    Product Brand                                      : NVIDIA RTX",
            f"    Product Architecture                               : {g.arch}",
            "    Display Mode                                       : Disabled",
            "    Display Active                                     : Disabled",
            f"    Persistence Mode                                   : {pm}",
            "    Addressing Mode                                    : HMM",
            "    MIG Mode",
            "        Current                                        : Disabled",
            "        Pending                                        : Disabled",
            f"    Serial Number                                      : {g.serial}",
            f"    GPU UUID                                           : {g.uuid}",
            f"    Minor Number                                       : {g.index}",
            f"    VBIOS Version                                      : {g.vbios}",
            "    GPU Virtualization Mode",
            "        Virtualization Mode                            : None",
            "        Host VGPU Mode                                 : N/A",
            "    PCI",
            f"        Bus                                            : 0x{bus}",
            "        Device                                         : 0x00",
            "        Domain                                         : 0x0000",
            f"        Device Id                                      : 0x{g.device_id.upper()}10DE",
            f"        Bus Id                                         : {g.nvml_bus_id}",
            f"        Sub System Id                                  : 0x{g.subsys_id.upper()}10DE",
            "        GPU Link Info",
            "            PCIe Generation",
            f"                Max                                    : {g.gen_max}",
            f"                Current                                : {g.idle_gen}",
            f"                Device Current                         : {g.idle_gen}",
            f"                Device Max                             : {g.gen_max}",
            f"                Host Max                               : {g.gen_max}",
            "            Link Width",
            f"                Max                                    : {g.width_max}x",
            f"                Current                                : {g.width_max}x",
            "    FB Memory Usage",
            f"        Total                                          : {g.memory_mib} MiB",
            "        Reserved                                       : 530 MiB",
            "        Used                                           : 0 MiB",
            f"        Free                                           : {g.memory_mib - 530} MiB",
            "    BAR1 Memory Usage",
            f"        Total                                          : {g.bar1_mib} MiB",
            "        Used                                           : 1 MiB",
            f"        Free                                           : {g.bar1_mib - 1} MiB",
            "    Compute Mode                                       : Default",
            "    Performance State                                  : P8",
            "    Processes                                          : None",
            "",
        ]
    return "\n".join(out) + "\n"


def summary(gpus: list[Gpu], driver: str) -> str:
    bar = "+-----------------------------------------+------------------------+----------------------+"
    out = [
        time.strftime("%a %b %e %H:%M:%S %Y       "),
        "+-----------------------------------------------------------------------------------------+",
        f"| NVIDIA-SMI {driver:<22} Driver Version: {driver:<14} CUDA Version: {cuda_version(driver):<9}|",
        bar,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    pm = "On" if persistence_enabled() else "Off"
    for i, g in enumerate(gpus):
        name = g.name if len(g.name) <= 25 else g.name[:22] + "..."
        out += [
            f"| {i:>3}  {name:<25} {pm:>7}  | {g.nvml_bus_id:>18} Off |{'0':>21} |",
            f"| N/A   31C    P8 {'32W /':>22} {g.power_limit_w:>4}W | {'0MiB /':>12} {g.memory_mib:>6}MiB |"
            f"{'0%':>9}      Default |",
            f"|{'':41}|{'':24}|{'Disabled':>21} |",
            bar,
        ]
    out += [
        "",
        "+-----------------------------------------------------------------------------------------+",
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|=========================================================================================|",
        "|  No running processes found                                                             |",
        "+-----------------------------------------------------------------------------------------+",
    ]
    return "\n".join(out) + "\n"


def persistence_mode(gpus: list[Gpu], enable: bool) -> str:
    """``nvidia-smi -pm 0|1``: root on the host only (a container has no such permission)."""
    if os.geteuid() != 0 or not kernel.on_node():
        return (
            "".join(f"Unable to set persistence mode for GPU {g.nvml_bus_id}: Insufficient Permissions\n" for g in gpus)
            + "Terminating early due to previous errors.\n"
        )
    from . import paths

    if enable:
        open(paths.PERSISTENCE_FLAG, "w").close()
    elif os.path.exists(paths.PERSISTENCE_FLAG):
        os.unlink(paths.PERSISTENCE_FLAG)
    word = "Enabled" if enable else "Disabled"
    return "".join(f"{word} persistence mode for GPU {g.nvml_bus_id}.\n" for g in gpus) + "All done.\n"


# ---- command line --------------------------------------------------------------------------


def _option(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
    return None


def _select(gpus: list[Gpu], argv: list[str]) -> list[Gpu]:
    ids = _option(argv, "-i", "--id")
    if ids is None:
        return gpus
    chosen = []
    for token in ids.split(","):
        match = [g for pos, g in enumerate(gpus) if token in (str(pos), g.uuid, g.nvml_bus_id, g.bdf)]
        if not match:
            raise SmiExit(f'No devices were found matching the given ID "{token}"\n', RC_INVALID)
        chosen += match
    return chosen


def run(argv: list[str], version: str) -> str:
    if "--version" in argv:
        return (
            f"NVIDIA-SMI version  : {version}\nNVML version        : {version.split('.')[0]}.{version.split('.')[1]}\n"
            f"DRIVER version      : {version}\nCUDA Version        : {cuda_version(version)}\n"
        )
    gpus = init(version)
    driver = version
    tty = sys.stdout.isatty()
    if argv and argv[0] == "topo":
        rest = argv[1:]
        if "-m" in rest or "--matrix" in rest:
            return topo.matrix(gpus, tty)
        cap = _option(rest, "-p2p", "--p2pstatus")
        if cap is not None:
            if cap not in topo.P2P_CAPS:
                raise SmiExit(f'Invalid p2p capability "{cap}". Use one of r, w, n, a, p.', RC_INVALID)
            return topo.p2p(gpus, cap, tty)
        raise SmiExit(
            "Usage: nvidia-smi topo [options]\n    -m,   --matrix  Display the GPUDirect "
            "communication matrix for the system.\n    -p2p, --p2pstatus Displays the p2p status "
            "between the GPUs of a given p2p capability\n",
            RC_INVALID,
        )
    gpus = _select(gpus, argv)
    if "-L" in argv or "--list-gpus" in argv:
        return list_gpus(gpus)
    q = _option(argv, "--query-gpu")
    if q is not None:
        fmt = (_option(argv, "--format") or "").split(",")
        return query(gpus, [f.strip() for f in q.split(",") if f.strip()], [f.strip() for f in fmt], driver)
    if "-q" in argv or "--query" in argv:
        return full_query(gpus, driver)
    pm = _option(argv, "-pm", "--persistence-mode")
    if pm is not None:
        return persistence_mode(gpus, pm in ("1", "ENABLED", "enabled"))
    if not argv:
        return summary(gpus, driver)
    raise SmiExit("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", RC_INVALID)


def _loop_s(argv: list[str]) -> float | None:
    """``-l SEC`` / ``--loop=SEC`` or ``-lms MS`` / ``--loop-ms=MS``: repeat a query at this period."""
    ms = _option(argv, "-lms", "--loop-ms")
    if ms is not None:
        return max(int(ms), 1) / 1000.0
    sec = _option(argv, "-l", "--loop")
    return None if sec is None else max(int(sec), 1)


def main(argv: list[str], version: str) -> int:
    try:
        period = _loop_s(argv) if _option(argv, "--query-gpu") is not None else None
        if period is None:
            sys.stdout.write(run(argv, version))
            return 0
        # like the driver's: the query again every period until interrupted; each tick's lines flushed at once
        next_tick = time.monotonic()
        while True:
            sys.stdout.write(run(argv, version))
            sys.stdout.flush()
            next_tick += period
            time.sleep(max(0.0, next_tick - time.monotonic()))
    except SmiExit as exc:
        (sys.stderr if exc.stream == "err" else sys.stdout).write(exc.text.rstrip("\n") + "\n")
        return exc.code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 0
