"""At node boot, start the guests configured with ``onboot: 1`` (what pve-guests.service does)."""

from __future__ import annotations

import sys

from gpuhost.lab.node import guests, lxc, qemu


def start_onboot_guests() -> None:
    for vmid in guests.list_ids("lxc"):
        if guests.load("lxc", vmid).get("onboot") == "1":
            try:
                lxc.start(vmid)
            except Exception as exc:  # like PVE: log and go on with the next guest
                print(f"CT {vmid}: start failed: {exc}", file=sys.stderr)
    for vmid in guests.list_ids("qemu"):
        if guests.load("qemu", vmid).get("onboot") == "1":
            try:
                qemu.start(vmid)
            except Exception as exc:
                print(f"VM {vmid}: start failed: {exc}", file=sys.stderr)
