"""update-grub: regenerate /boot/grub/grub.cfg (and refresh the ESPs where proxmox-boot-tool manages them)."""

from __future__ import annotations

import sys

from gpuhost.lab.node import bootloader
from gpuhost.lab.node.cli.boot_tool import refresh_output
from gpuhost.lab.node.state import load


def main(argv: list[str]) -> int:
    st = load()
    print("Generating grub configuration file ...", file=sys.stderr)
    bootloader.write_grub_cfg("/", st.kernel)
    print(f"Found linux image: /boot/vmlinuz-{st.kernel}", file=sys.stderr)
    print(f"Found initrd image: /boot/initrd.img-{st.kernel}", file=sys.stderr)
    print("done", file=sys.stderr)
    if bootloader.esp_uuids("/") is not None:
        # proxmox-kernel-helper 000_proxmox_boot_header: update-grub on a proxmox-boot-tool system warns
        # and runs 'proxmox-boot-tool refresh'
        print("W: This system is booted via proxmox-boot-tool:", file=sys.stderr)
        print("W: Executing 'update-grub' directly does not update the correct configs!", file=sys.stderr)
        print("W: Running: 'proxmox-boot-tool refresh'", file=sys.stderr)
        refresh_output(st.kernel, grub=st.boot == "grub-pbt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
