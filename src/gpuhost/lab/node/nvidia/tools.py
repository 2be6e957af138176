"""``nvidia-modprobe`` and ``nvidia-persistenced``: the setuid helper that loads modules and makes
device nodes, and the daemon that keeps the GPUs initialised."""

from __future__ import annotations

import os
import sys

from . import kernel, paths


def modprobe_main(argv: list[str]) -> int:
    """``nvidia-modprobe [-c N]... [-u] [-m] [-s] [-l]``: silent, exit 1 on failure (as the real one)."""
    minors: list[int] = []
    uvm = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        value: str | None = None
        if arg in ("-c", "--create-nvidia-device-file"):
            i += 1
            value = argv[i] if i < len(argv) else ""
        elif arg.startswith("--create-nvidia-device-file="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-c"):
            value = arg[2:]
        elif arg in ("-u", "--unified-memory"):
            uvm = True
        if value is not None:
            if not value.isdigit():
                return 1
            minors.append(int(value))
        i += 1
    if not kernel.on_node() or os.geteuid() != 0:
        return 1
    try:
        kernel.load("nvidia")
        if minors:
            kernel.create_gpu_nodes(minors)
        if uvm:
            kernel.load("nvidia_uvm")
            kernel.create_uvm_nodes()
    except (kernel.ModuleError, OSError):
        return 1
    return 0


def persistenced_main(argv: list[str]) -> int:
    if os.geteuid() != 0:
        print("nvidia-persistenced failed to initialize. Check syslog for more details.", file=sys.stderr)
        return 1
    if not os.path.exists(f"{paths.PROC_NVIDIA}/version"):
        print("nvidia-persistenced failed to initialize. Check syslog for more details.", file=sys.stderr)
        return 1
    if kernel.on_node():
        kernel.create_gpu_nodes()
    open(paths.PERSISTENCE_FLAG, "w").close()
    os.makedirs("/var/run/nvidia-persistenced", exist_ok=True)
    with open("/var/run/nvidia-persistenced/nvidia-persistenced.pid", "w") as fh:
        fh.write(f"{os.getpid()}\n")
    if "--verbose" in argv:
        print("nvidia-persistenced: Verbose syslog connection opened", file=sys.stderr)
    return 0
