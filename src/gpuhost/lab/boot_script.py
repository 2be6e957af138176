"""The shell script that boots one node inside fresh mount, UTS and PID namespaces.

Run as ``unshare -m -u -p --fork --kill-child=SIGKILL --propagation private sh boot-node.sh
NAME NODE_DIR HIDE_DIR BOOT [CHECKOUT]`` (BOOT: grub or systemd-boot; CHECKOUT: gpuhost's source
checkout, hidden from the node like the lab's state directory). It mounts the node's root (overlay: host ``/`` below, the node's
persistent upper layer above), gives it private /proc, /dev, /run and /tmp, hides the lab's state
directory, shows the supervisor-chosen command line as /proc/cmdline, and pivots into it to run the
node's init.
"""

BOOT_SCRIPT = r"""#!/bin/sh
set -eu
name=$1 node=$2 hide=$3 boot=$4 checkout=${5:-}
R=$node/root
# the previous boot's overlay may take a moment to be released after a reboot
i=0
until mount -t overlay "lab-$name" -o "lowerdir=/,upperdir=$node/upper,workdir=$node/work" "$R" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "cannot mount the root overlay of $name" >&2; exit 1; }
    sleep 0.05
done
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"; mount --make-rslave "$R/sys"
# firmware as the node's boot mode shows it: UEFI (systemd-boot) or legacy BIOS (GRUB)
mount -t tmpfs -o mode=0755,size=1m "firmware-$name" "$R/sys/firmware"
if [ "$boot" = systemd-boot ]; then
    mkdir -p "$R/sys/firmware/efi/efivars"
    echo 64 > "$R/sys/firmware/efi/fw_platform_size"
fi
mount -t tmpfs -o mode=0755,size=16m,nosuid "dev-$name" "$R/dev"
for d in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
    IFS=: read n ma mi <<EOF2
$d
EOF2
    mknod -m 666 "$R/dev/$n" c "$ma" "$mi"
done
mkdir "$R/dev/pts" "$R/dev/shm" "$R/dev/net"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$R/dev/pts"
ln -s pts/ptmx "$R/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$R/dev/shm"
ln -s /proc/self/fd "$R/dev/fd"; ln -s /proc/self/fd/0 "$R/dev/stdin"
ln -s /proc/self/fd/1 "$R/dev/stdout"; ln -s /proc/self/fd/2 "$R/dev/stderr"
mount -t tmpfs -o mode=0755,nosuid,nodev "run-$name" "$R/run"
mount -t tmpfs -o mode=1777,nosuid,nodev "tmp-$name" "$R/tmp"
[ -z "$checkout" ] || [ ! -d "$R$checkout" ] || mount -t tmpfs -o mode=0755,size=1m hide "$R$checkout"
[ ! -d "$R$hide" ] || mount -t tmpfs -o mode=0700,size=1m hide "$R$hide"
mkdir -p "$R/run/gpuhost-lab" "$R/run/sshd" "$R/var/lib/gpuhost-lab/disk" "$R/var/lib/gpuhost-lab/ctbase"
mount --bind "$hide/node-lib" "$R/usr/lib/gpuhost-lab/python"
mount -o remount,bind,ro "$R/usr/lib/gpuhost-lab/python"
mount --bind "$node/ctl" "$R/run/gpuhost-lab"
mkdir -p "$R/run/gpuhost-lab-boot"
mount --bind "$node/boot" "$R/run/gpuhost-lab-boot"
mount -o remount,bind,ro "$R/run/gpuhost-lab-boot"
mount --bind "$node/disk" "$R/var/lib/gpuhost-lab/disk"
mount --bind / "$R/var/lib/gpuhost-lab/ctbase"
mount -o remount,bind,ro "$R/var/lib/gpuhost-lab/ctbase"
mount --bind "$node/boot/cmdline" "$R/proc/cmdline"
mount -o remount,bind,ro "$R/proc/cmdline"
mount --bind "$node/boot/boot_id" "$R/proc/sys/kernel/random/boot_id"
mount -o remount,bind,ro "$R/proc/sys/kernel/random/boot_id"
mount --bind "$node/boot/cpuinfo" "$R/proc/cpuinfo"
mount -o remount,bind,ro "$R/proc/cpuinfo"
mount --bind "$node/boot/version" "$R/proc/version"
mount -o remount,bind,ro "$R/proc/version"
# a cluster member: pmxcfs's shared tree (gpuhost.lab.cluster) at /etc/pve/nodes and /etc/pve/ha
if [ -e "$node/pmxcfs" ]; then
    mount --bind "$node/pmxcfs/nodes" "$R/etc/pve/nodes"
    mount --bind "$node/pmxcfs/ha" "$R/etc/pve/ha"
fi
hostname "$name"
cd "$R"
mkdir -p .oldroot
pivot_root . .oldroot
cd /
umount -l /.oldroot
rmdir /.oldroot
exec /usr/bin/python3 -I /usr/lib/gpuhost-lab/python/gpuhost/lab/node/init.py
"""
