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

OS_RELEASE_TRIXIE = """\
PRETTY_NAME="Debian GNU/Linux 13 (trixie)"
NAME="Debian GNU/Linux"
VERSION_ID="13"
VERSION="13 (trixie)"
VERSION_CODENAME=trixie
DEBIAN_VERSION_FULL=13.1
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
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
