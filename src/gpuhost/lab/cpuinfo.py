"""/proc/cpuinfo as a node of the chosen CPU vendor shows it (the host's, re-badged).

The number of processors and their flags stay the host's (what the node really runs on), with
the vendor, model name, family and virtualisation flag (svm/vmx) of the chosen vendor."""

from __future__ import annotations

import re

VENDORS = {
    "amd": {
        "vendor_id": "AuthenticAMD",
        "cpu family": "25",
        "model": "17",
        "model name": "AMD EPYC 9554 64-Core Processor",
        "virt": "svm",
        "other": "vmx",
    },
    "intel": {
        "vendor_id": "GenuineIntel",
        "cpu family": "6",
        "model": "207",
        "model name": "INTEL(R) XEON(R) PLATINUM 8592+",
        "virt": "vmx",
        "other": "svm",
    },
}


def rebadge(host_cpuinfo: str, vendor: str) -> str:
    v = VENDORS[vendor]
    out = []
    for line in host_cpuinfo.splitlines():
        key = line.split(":", 1)[0].strip()
        if key in ("vendor_id", "cpu family", "model", "model name"):
            line = f"{line.split(':', 1)[0]}: {v[key]}"
        elif key == "flags":
            flags = [f for f in line.split(":", 1)[1].split() if f not in ("svm", "vmx")]
            line = f"{line.split(':', 1)[0]}: {' '.join(flags + [v['virt']])}"
        out.append(line)
    text = "\n".join(out) + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)
