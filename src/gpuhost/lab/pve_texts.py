"""Stock file contents of a fresh Proxmox VE install, as a lab node gets them."""

from __future__ import annotations

DEFAULT_GRUB = """\
# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`( . /etc/os-release; echo ${NAME%% *} ) 2>/dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX=""

# If your computer has multiple operating systems installed, then you
# probably want to run os-prober. However, if your computer is a host
# for guest OSes installed via LVM or raw disk devices, running
# os-prober can cause damage to those guest OSes as it mounts
# filesystems to look for things.
#GRUB_DISABLE_OS_PROBER=false

# Uncomment to enable BadRAM filtering, modify to suit your needs
# This works with Linux (no patch required) and with any kernel that obtains
# the memory map information from GRUB (GNU Mach, kernel of FreeBSD ...)
#GRUB_BADRAM="0x01234567,0xfefefefe,0x89abcdef,0xefefefef"

# Uncomment to disable graphical terminal
#GRUB_TERMINAL=console

# The resolution used on graphical terminal
# note that you can use only modes which your graphic card supports via VBE
# you can see them in real GRUB with the command `vbeinfo'
#GRUB_GFXMODE=640x480

# Uncomment if you don't want GRUB to pass "root=UUID=xxx" parameter to Linux
#GRUB_DISABLE_LINUX_UUID=true

# Uncomment to disable generation of recovery mode menu entries
#GRUB_DISABLE_RECOVERY="true"

# Uncomment to get a beep at grub start
#GRUB_INIT_TUNE="480 440 1"
"""

ETC_MODULES = """\
# /etc/modules: kernel modules to load at boot time.
#
# This file contains the names of kernel modules that should be loaded
# at boot time, one per line. Lines beginning with "#" are ignored.
# Parameters can be specified after the module name.

"""

PVE_BLACKLIST = """\
# This file contains a list of modules which are not supported by Proxmox VE

# nvidiafb see bugreport https://bugzilla.proxmox.com/show_bug.cgi?id=701
blacklist nvidiafb
"""

ZFS_KERNEL_CMDLINE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"

STORAGE_CFG_LVM = """\
dir: local
\tpath /var/lib/vz
\tcontent iso,vztmpl,backup

lvmthin: local-lvm
\tthinpool data
\tvgname pve
\tcontent rootdir,images

"""

STORAGE_CFG_ZFS = """\
dir: local
\tpath /var/lib/vz
\tcontent iso,vztmpl,backup

zfspool: local-zfs
\tpool rpool/data
\tsparse
\tcontent images,rootdir

"""

CT_TEMPLATE = "debian-12-standard_12.7-1_amd64.tar.zst"

#: ``pveversion -v`` package list of a PVE 8.3 and a PVE 9.0 install (kernel line is added separately).
PACKAGE_VERSIONS: dict[int, list[tuple[str, str]]] = {
    8: [("proxmox-ve", "8.3.0"), ("pve-manager", "8.3.0"), ("proxmox-kernel-helper", "8.1.0"),
        ("proxmox-kernel-6.8", "6.8.12-4"), ("ceph-fuse", "17.2.7-pve3"), ("corosync", "3.1.7-pve3"),
        ("criu", "3.17.1-2+deb12u1"), ("ifupdown2", "3.2.0-1+pmx11"), ("ksm-control-daemon", "1.5-1"),
        ("libjs-extjs", "7.0.0-5"), ("libknet1", "1.28-pve1"), ("libpve-access-control", "8.2.0"),
        ("libpve-cluster-perl", "8.0.10"), ("libpve-common-perl", "8.2.9"),
        ("libpve-guest-common-perl", "5.1.6"), ("libpve-http-server-perl", "5.1.2"),
        ("libpve-storage-perl", "8.2.9"), ("lvm2", "2.03.16-2"), ("lxc-pve", "6.0.0-1"), ("lxcfs", "6.0.0-pve2"),
        ("novnc-pve", "1.5.0-1"), ("proxmox-backup-client", "3.2.9-1"), ("proxmox-widget-toolkit", "4.3.3"),
        ("pve-cluster", "8.0.10"), ("pve-container", "5.2.2"), ("pve-docs", "8.3.1"),
        ("pve-edk2-firmware", "4.2023.08-4"), ("pve-firewall", "5.1.0"), ("pve-firmware", "3.14-1"),
        ("pve-ha-manager", "4.0.6"), ("pve-i18n", "3.3.1"), ("pve-qemu-kvm", "9.0.2-4"),
        ("qemu-server", "8.3.0"), ("smartmontools", "7.3-pve1"), ("spiceterm", "3.3.0"),
        ("swtpm", "0.8.0+pve1"), ("vncterm", "1.8.0"), ("zfsutils-linux", "2.2.6-pve1")],
    9: [("proxmox-ve", "9.0.0"), ("pve-manager", "9.0.3"), ("proxmox-kernel-helper", "9.0.3"),
        ("proxmox-kernel-6.14", "6.14.8-2"), ("ceph-fuse", "19.2.3-pve1"), ("corosync", "3.1.9-pve2"),
        ("criu", "4.1.1-1"), ("ifupdown2", "3.3.0-1+pmx9"), ("ksm-control-daemon", "1.5-1"),
        ("libjs-extjs", "7.0.0-5"), ("libknet1", "1.30-pve2"), ("libpve-access-control", "9.0.3"),
        ("libpve-cluster-perl", "9.0.6"), ("libpve-common-perl", "9.0.9"),
        ("libpve-guest-common-perl", "6.0.2"), ("libpve-http-server-perl", "6.0.4"),
        ("libpve-storage-perl", "9.0.13"), ("lvm2", "2.03.31-2"), ("lxc-pve", "6.0.4-2"), ("lxcfs", "6.0.4-pve1"),
        ("novnc-pve", "1.6.0-3"), ("proxmox-backup-client", "4.0.14-1"), ("proxmox-widget-toolkit", "5.0.5"),
        ("pve-cluster", "9.0.6"), ("pve-container", "6.0.9"), ("pve-docs", "9.0.8"),
        ("pve-edk2-firmware", "4.2025.02-4"), ("pve-firewall", "6.0.3"), ("pve-firmware", "3.16-3"),
        ("pve-ha-manager", "5.0.4"), ("pve-i18n", "3.5.2"), ("pve-qemu-kvm", "10.0.2-4"),
        ("qemu-server", "9.0.16"), ("smartmontools", "7.4-pve1"), ("spiceterm", "3.4.0"),
        ("swtpm", "0.8.0+pve2"), ("vncterm", "1.9.0"), ("zfsutils-linux", "2.3.3-pve1")],
}

#: pve-manager build ids shown by ``pveversion``.
MANAGER_BUILD: dict[int, str] = {8: "c1689ccb1065a83b", 9: "025864202ebb6109"}
QEMU_VERSION: dict[int, str] = {8: "9.0.2", 9: "10.0.2"}


def seed_vm_config(storage: str, pve: int, uuid: str, vmgenid: str, mac: str) -> str:
    """VM 100 as a fresh install has it: i440fx (no ``machine``), SeaBIOS, no passthrough."""
    return (
        "boot: order=scsi0;ide2;net0\n"
        "cores: 8\n"
        "cpu: x86-64-v2-AES\n"
        "ide2: none,media=cdrom\n"
        "memory: 65536\n"
        f"meta: creation-qemu={QEMU_VERSION[pve]},ctime=1731337200\n"
        "name: llm-serving\n"
        f"net0: virtio={mac},bridge=vmbr0,firewall=1\n"
        "numa: 0\n"
        "ostype: l26\n"
        f"scsi0: {storage}:vm-100-disk-0,iothread=1,size=200G\n"
        "scsihw: virtio-scsi-single\n"
        f"smbios1: uuid={uuid}\n"
        "sockets: 1\n"
        f"vmgenid: {vmgenid}\n"
    )
