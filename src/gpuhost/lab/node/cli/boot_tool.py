"""proxmox-boot-tool status|refresh|kernel list (the parts gpuhost uses)."""

from __future__ import annotations

import sys

from gpuhost.lab.node import bootloader, paths
from gpuhost.lab.node.state import load


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "help"
    st = load()
    uuids = bootloader.esp_uuids("/")
    if cmd == "status":
        quiet = "--quiet" in argv
        if uuids is None:
            if not quiet:
                print(f"E: {paths.ESP_LIST} does not exist.", file=sys.stderr)
            return 2
        if quiet:
            return 0
        print("Re-executing '/usr/sbin/proxmox-boot-tool' in new private mount namespace..")
        print(
            "System currently booted with uefi"
            if st.boot == "systemd-boot"
            else "System currently booted with legacy bios"
        )
        # proxmox-boot-tool:450-466: "uefi" where the ESP has loader/loader.conf, "grub" where it has grub/
        kind = "grub" if st.boot == "grub-pbt" else "uefi"
        for uuid in uuids:
            print(f"{uuid} is configured with: {kind} (versions: {st.kernel})")
        return 0
    if cmd == "refresh":
        if uuids is None:
            print(f"E: {paths.ESP_LIST} does not exist.", file=sys.stderr)
            return 2
        print("Running hook script 'proxmox-auto-removal'..")
        print("Running hook script 'zz-proxmox-boot'..")
        print(refresh_output(st.kernel, grub=st.boot == "grub-pbt"))
        return 0
    if cmd == "kernel" and argv[1:2] == ["list"]:
        print("Manually selected kernels:\nNone.\n\nAutomatically selected kernels:")
        print(st.kernel)
        return 0
    print(
        "USAGE: /usr/sbin/proxmox-boot-tool <commands> [ARGS]\n\n"
        "  /usr/sbin/proxmox-boot-tool status [--quiet]\n  /usr/sbin/proxmox-boot-tool refresh\n"
        "  /usr/sbin/proxmox-boot-tool kernel list",
        file=sys.stderr,
    )
    return 1 if cmd != "help" else 0


def refresh_output(kernel: str, *, grub: bool = False) -> str:
    """Copy kernels and /etc/kernel/cmdline (systemd-boot) or regenerate grub.cfg (GRUB) onto every ESP;
    PVE's messages."""
    lines = ["Re-executing '/etc/kernel/postinst.d/zz-proxmox-boot' in new private mount namespace.."]
    for uuid in bootloader.refresh_esps("/", kernel, grub=grub):
        lines.append(f"Copying and configuring kernels on /dev/disk/by-uuid/{uuid}")
        lines.append(f"\tCopying kernel and creating boot-entry for {kernel}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
