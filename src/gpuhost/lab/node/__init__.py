"""Code that runs inside a lab node (standard library only; copied into every node).

It makes the node answer like a Proxmox VE 8/9 node: ``qm``, ``pct``, ``pvesh``, ``pveversion``,
``proxmox-boot-tool``, ``update-grub``, ``update-initramfs``, ``reboot``, and the HTTPS API on
port 8006. Shims read and write the node's state JSON (:mod:`state`) and PVE's own files.
"""
