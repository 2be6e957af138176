"""update-initramfs -u [-k all|VERSION]: rebuild the initrd from the module configuration.

The lab's initrd records /etc/modules, /etc/modules-load.d, /etc/modprobe.d and
/etc/initramfs-tools/modules as they are now (later parts read it to decide what loads at boot)."""

from __future__ import annotations

import glob
import json
import os
import sys

from gpuhost.lab.node import bootloader
from gpuhost.lab.node.cli.boot_tool import refresh_output
from gpuhost.lab.node.state import load

_SOURCES = ["/etc/modules", "/etc/initramfs-tools/modules", "/etc/modules-load.d/*.conf", "/etc/modprobe.d/*.conf"]


def snapshot() -> dict[str, str]:
    files: dict[str, str] = {}
    for pattern in _SOURCES:
        for path in sorted(glob.glob(pattern)):
            try:
                files[path] = open(path).read()
            except OSError:
                continue
    return files


def main(argv: list[str]) -> int:
    if not any(a in ("-u", "-c") for a in argv):
        print("Usage: update-initramfs {-c|-d|-u} [-k version] [-v] [-b directory]", file=sys.stderr)
        return 2
    st = load()
    version = argv[argv.index("-k") + 1] if "-k" in argv and argv.index("-k") + 1 < len(argv) else st.kernel
    if version not in ("all", st.kernel):
        print(f"update-initramfs: {version} has no matching /lib/modules", file=sys.stderr)
        return 1
    target = f"/boot/initrd.img-{st.kernel}"
    print(f"update-initramfs: Generating {target}")
    tmp = f"{target}.new"
    with open(tmp, "w") as fh:
        json.dump({"kernel": st.kernel, "files": snapshot()}, fh, indent=1, sort_keys=True)
    os.replace(tmp, target)
    if bootloader.esp_uuids("/") is not None:
        print("Running hook script 'zz-proxmox-boot'..")
        print(refresh_output(st.kernel, grub=st.boot == "grub-pbt"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
