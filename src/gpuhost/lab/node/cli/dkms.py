"""dkms (3.0.10) as the lab simulates it: ``status`` lists what the NVIDIA installer registered."""

from __future__ import annotations

import glob
import os
import sys


def status() -> list[str]:
    lines = []
    for path in sorted(glob.glob("/var/lib/dkms/*/*/*/*/module")):
        parts = path.split("/")
        module, version, kernel, arch = parts[4], parts[5], parts[6], parts[7]
        installed = os.path.exists(f"/lib/modules/{kernel}/updates/dkms")
        lines.append(f"{module}/{version}, {kernel}, {arch}: {'installed' if installed else 'built'}")
    return lines


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "Usage: /usr/sbin/dkms [action] [options]\n  [action]  = { add | remove | build | unbuild | install | "
            "uninstall | match | autoinstall | mktarball | ldtarball | mkrpm | mkkmp | mkdeb | mkbmdeb | "
            "mkdriverdisk | mkdsc | status | generate_mok }",
            file=sys.stderr,
        )
        return 0 if argv else 1
    if argv[0] in ("--version", "-V"):
        print("dkms-3.0.10")
        return 0
    if argv[0] == "status":
        for line in status():
            print(line)
        return 0
    if argv[0] == "autoinstall":
        return 0
    print(f"Error! Unknown action: {argv[0]} (the gpuhost lab's dkms supports status and autoinstall)", file=sys.stderr)
    return 4


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
