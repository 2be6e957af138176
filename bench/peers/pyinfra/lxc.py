"""The converged checks of ``gpuhost provision lxc`` and ``verify lxc`` as a pyinfra deploy (bench/commands.py):
IOMMU on the running kernel's command line, the container's config passing the GPUs, the container running, its
driver equal to the host's. Each is a fact (one command each, as pyinfra reads facts); a failed check raises."""

import os
import re

from pyinfra import host
from pyinfra.facts.server import Command

CTID = int(os.environ.get("BENCH_CTID", "200"))


def read(command: str) -> str:
    return host.get_fact(Command, command=command) or ""


cmdline = read("cat /proc/cmdline").split()
if not {"iommu=pt", "amd_iommu=on", "intel_iommu=on"} & set(cmdline):
    raise SystemExit("no IOMMU on the running kernel's command line")
module = re.search(r"Kernel Module(?: for \S+)? +([0-9.]+)", read("cat /proc/driver/nvidia/version"))
if "/dev/nvidia0" not in read(f"cat /etc/pve/lxc/{CTID}.conf"):
    raise SystemExit(f"CT {CTID} does not get the GPUs")
if read(f"pct status {CTID}").strip() != "status: running":
    raise SystemExit(f"CT {CTID} is not running")
inside = read(f"pct exec {CTID} -- nvidia-smi --query-gpu=driver_version --format=csv,noheader")
if module is None or set(inside.split()) != {module.group(1)}:
    raise SystemExit(f"CT {CTID}'s driver is not the host's")
