"""Package versions a node reports (``pveversion``, ``/version``): those of a PVE 8.3 or 9.0 install."""

from __future__ import annotations

from gpuhost.lab.node.state import load

PACKAGES: dict[int, list[tuple[str, str]]] = {
    8: [
        ("proxmox-ve", "8.3.0"),
        ("pve-manager", "8.3.0"),
        ("proxmox-kernel-helper", "8.1.0"),
        ("proxmox-kernel-6.8", "6.8.12-4"),
        ("ceph-fuse", "17.2.7-pve3"),
        ("corosync", "3.1.7-pve3"),
        ("criu", "3.17.1-2+deb12u1"),
        ("ifupdown2", "3.2.0-1+pmx11"),
        ("ksm-control-daemon", "1.5-1"),
        ("libjs-extjs", "7.0.0-5"),
        ("libknet1", "1.28-pve1"),
        ("libpve-access-control", "8.2.0"),
        ("libpve-cluster-perl", "8.0.10"),
        ("libpve-common-perl", "8.2.9"),
        ("libpve-guest-common-perl", "5.1.6"),
        ("libpve-http-server-perl", "5.1.2"),
        ("libpve-storage-perl", "8.2.9"),
        ("lvm2", "2.03.16-2"),
        ("lxc-pve", "6.0.0-1"),
        ("lxcfs", "6.0.0-pve2"),
        ("novnc-pve", "1.5.0-1"),
        ("proxmox-backup-client", "3.2.9-1"),
        ("proxmox-widget-toolkit", "4.3.3"),
        ("pve-cluster", "8.0.10"),
        ("pve-container", "5.2.2"),
        ("pve-docs", "8.3.1"),
        ("pve-edk2-firmware", "4.2023.08-4"),
        ("pve-firewall", "5.1.0"),
        ("pve-firmware", "3.14-1"),
        ("pve-ha-manager", "4.0.6"),
        ("pve-i18n", "3.3.1"),
        ("pve-qemu-kvm", "9.0.2-4"),
        ("qemu-server", "8.3.0"),
        ("smartmontools", "7.3-pve1"),
        ("spiceterm", "3.3.0"),
        ("swtpm", "0.8.0+pve1"),
        ("vncterm", "1.8.0"),
        ("zfsutils-linux", "2.2.6-pve1"),
    ],
    9: [
        ("proxmox-ve", "9.0.0"),
        ("pve-manager", "9.0.3"),
        ("proxmox-kernel-helper", "9.0.3"),
        ("proxmox-kernel-6.14", "6.14.8-2"),
        ("ceph-fuse", "19.2.3-pve1"),
        ("corosync", "3.1.9-pve2"),
        ("criu", "4.1.1-1"),
        ("ifupdown2", "3.3.0-1+pmx9"),
        ("ksm-control-daemon", "1.5-1"),
        ("libjs-extjs", "7.0.0-5"),
        ("libknet1", "1.30-pve2"),
        ("libpve-access-control", "9.0.3"),
        ("libpve-cluster-perl", "9.0.6"),
        ("libpve-common-perl", "9.0.9"),
        ("libpve-guest-common-perl", "6.0.2"),
        ("libpve-http-server-perl", "6.0.4"),
        ("libpve-storage-perl", "9.0.13"),
        ("lvm2", "2.03.31-2"),
        ("lxc-pve", "6.0.4-2"),
        ("lxcfs", "6.0.4-pve1"),
        ("novnc-pve", "1.6.0-3"),
        ("proxmox-backup-client", "4.0.14-1"),
        ("proxmox-widget-toolkit", "5.0.5"),
        ("pve-cluster", "9.0.6"),
        ("pve-container", "6.0.9"),
        ("pve-docs", "9.0.8"),
        ("pve-edk2-firmware", "4.2025.02-4"),
        ("pve-firewall", "6.0.3"),
        ("pve-firmware", "3.16-3"),
        ("pve-ha-manager", "5.0.4"),
        ("pve-i18n", "3.5.2"),
        ("pve-qemu-kvm", "10.0.2-4"),
        ("qemu-server", "9.0.16"),
        ("smartmontools", "7.4-pve1"),
        ("spiceterm", "3.4.0"),
        ("swtpm", "0.8.0+pve2"),
        ("vncterm", "1.9.0"),
        ("zfsutils-linux", "2.3.3-pve1"),
    ],
}
MANAGER_BUILD: dict[int, str] = {8: "c1689ccb1065a83b", 9: "025864202ebb6109"}


def manager_version() -> tuple[str, str]:
    pve = load().pve
    return dict(PACKAGES[pve])["pve-manager"], MANAGER_BUILD[pve]


def pveversion_lines(verbose: bool) -> list[str]:
    st = load()
    version, build = manager_version()
    if not verbose:
        return [f"pve-manager/{version}/{build} (running kernel: {st.kernel})"]
    lines = []
    for name, ver in PACKAGES[st.pve]:
        if name == "proxmox-ve":
            lines.append(f"proxmox-ve: {ver} (running kernel: {st.kernel})")
        elif name == "pve-manager":
            lines.append(f"pve-manager: {ver} (running version: {version}/{build})")
        else:
            lines.append(f"{name}: {ver}")
        if name.startswith("proxmox-kernel-6"):
            lines.append(f"proxmox-kernel-{st.kernel}-signed: {ver}")
    return lines
