"""A node's first filesystem: what `lab up` writes into its upper layer before the first boot.

The node's root is an overlay of the host's own Debian (lower) and this upper layer, so seeding
means writing PVE's files here, hiding the host's (whiteouts, opaque directories), and installing
the node-side code and command shims. Later parts add files through :class:`SeedHook` callables.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gpuhost.lab.node as node_pkg
from gpuhost.lab import pve_texts
from gpuhost.lab.credentials import NodeTls
from gpuhost.lab.layout import NodeLayout, source_checkout
from gpuhost.lab.node import bootloader, paths
from gpuhost.lab.node.state import NodeState, kernel_for
from gpuhost.lab.spec import NodeSpec

#: command -> (path inside the node, module under gpuhost.lab.node.cli)
SHIMS: dict[str, tuple[str, str]] = {
    "qm": ("/usr/sbin/qm", "qm"),
    "pct": ("/usr/sbin/pct", "pct"),
    "pvesh": ("/usr/bin/pvesh", "pvesh"),
    "pveversion": ("/usr/bin/pveversion", "pveversion"),
    "proxmox-boot-tool": ("/usr/sbin/proxmox-boot-tool", "boot_tool"),
    "update-grub": ("/usr/sbin/update-grub", "update_grub"),
    "update-initramfs": ("/usr/sbin/update-initramfs", "update_initramfs"),
    "reboot": ("/usr/sbin/reboot", "reboot"),
    "pvecm": ("/usr/bin/pvecm", "pvecm"),
    "ha-manager": ("/usr/sbin/ha-manager", "ha_manager"),
    "systemctl": ("/usr/local/bin/systemctl", "systemctl"),  # runtime verbs; unit-file verbs go to the real one
}


@dataclass(frozen=True)
class NodeSecrets:
    """What a node must know of the lab's credentials."""

    client_public_key: str
    host_key_private: bytes
    host_key_public: bytes
    tls: NodeTls
    ca_pem: bytes
    token_id: str
    token_secret: str
    root_password_hash: str


SeedHook = Callable[[Path, NodeState], None]
"""Called with (upper layer, node state) after the stock seed: later parts add hardware here."""


def seed_node(
    layout: NodeLayout, spec: NodeSpec, secrets: NodeSecrets, seed_dirs: list[Path], hooks: list[SeedHook] | None = None
) -> NodeState:
    for d in (layout.upper, layout.work, layout.root, layout.disk, layout.ctl, layout.cmdline_file.parent):
        d.mkdir(parents=True, exist_ok=True)
    up = layout.upper
    state = NodeState(
        name=spec.name,
        address=spec.address,
        boot=spec.boot,
        cpu=spec.cpu,
        pve=spec.pve,
        kernel=kernel_for(spec.pve),
        root_fs="zfs" if spec.boot in ("systemd-boot", "grub-pbt") else "lvm",
        esp_uuids=[_esp_uuid(spec.name)] if spec.boot in ("systemd-boot", "grub-pbt") else [],
        token_id=secrets.token_id,
        extra={
            "hide_paths": sorted({str(layout.dir.parent.parent)} | _checkout()),
            "baseline_units": _host_enabled_units(),
        },
    )
    if spec.guest_of:  # a VM's guest: a Debian machine, no PVE of its own
        state.extra["guest_of"] = spec.guest_of
        state.extra["vmid"] = spec.vmid
    _identity(up, spec)
    _clean_root_home(up, secrets.client_public_key)
    _ssh_server(up, spec, secrets)
    _boot_files(up, state)
    _modules(up)
    if not spec.guest_of:
        _pve_tree(up, spec, state, secrets)
    _node_code(up, guest=bool(spec.guest_of))
    _no_package_sources(up)
    _write(up, paths.NODE_STATE, state.to_json())
    for seed_dir in seed_dirs:
        apply_seed_dir(up, seed_dir, spec.name)
    for hook in hooks or []:
        hook(up, state)
    return state


def apply_seed_dir(upper: Path, seed_dir: Path, node: str) -> None:
    """Copy a directory tree into the node; ``etc/pve/qemu-server`` and ``etc/pve/lxc`` land in
    ``etc/pve/nodes/<node>/`` as on a real node (where those two are symlinks)."""
    for src in sorted(seed_dir.rglob("*")):
        if not src.is_file():
            continue
        rel = src.relative_to(seed_dir).as_posix()
        for short in ("etc/pve/qemu-server/", "etc/pve/lxc/"):
            if rel.startswith(short):
                rel = f"etc/pve/nodes/{node}/{rel[len('etc/pve/') :]}"
        _write(upper, "/" + rel, src.read_bytes(), mode=stat.S_IMODE(src.stat().st_mode))


def _no_package_sources(up: Path) -> None:
    """Nodes share the host's network: give apt no sources, so nothing in a node reaches a mirror
    (a later part adds a local repository on loopback)."""
    _write(up, "/etc/apt/sources.list", "# gpuhost lab node: no package sources (see gpuhost.lab.seed)\n")
    sources_d = up / "etc/apt/sources.list.d"
    sources_d.mkdir(parents=True, exist_ok=True)
    _make_opaque(sources_d)


def _identity(up: Path, spec: NodeSpec) -> None:
    _write(up, "/etc/hostname", f"{spec.name}\n")
    _write(up, "/etc/hosts", f"127.0.0.1 localhost.localdomain localhost\n{spec.address} {spec.name}.lab {spec.name}\n")
    if spec.pve == 9:  # PVE 9 is built on Debian 13; the userland below stays the host's Debian 12
        _write(up, "/usr/lib/os-release", pve_texts.OS_RELEASE_TRIXIE)
        _write(up, "/etc/debian_version", "13.1\n")
    _write(up, "/etc/machine-id", uuidlib.uuid5(uuidlib.NAMESPACE_DNS, spec.name + spec.address).hex + "\n")


def _clean_root_home(up: Path, client_public_key: str) -> None:
    home = up / "root"
    home.mkdir(mode=0o700, exist_ok=True)
    _make_opaque(home)
    for name in (".bashrc", ".profile"):
        skel = Path("/etc/skel") / name
        if skel.exists():
            shutil.copyfile(skel, home / name)
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    _write(up, "/root/.ssh/authorized_keys", client_public_key, mode=0o600)


def _ssh_server(up: Path, spec: NodeSpec, secrets: NodeSecrets) -> None:
    for existing in Path("/etc/ssh").glob("ssh_host_*"):
        _whiteout(up, str(existing))
    _write(up, "/etc/ssh/ssh_host_ed25519_key", secrets.host_key_private, mode=0o600)
    _write(up, "/etc/ssh/ssh_host_ed25519_key.pub", secrets.host_key_public)
    _write(
        up,
        "/etc/ssh/sshd_config.d/00-gpuhost-lab.conf",
        (
            f"ListenAddress {spec.address}:22\n"
            "HostKey /etc/ssh/ssh_host_ed25519_key\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "MaxSessions 100\n"
            "MaxStartups 100:30:200\n"
            "UseDNS no\n"
        ),
    )


def _boot_files(up: Path, state: NodeState) -> None:
    kernel = state.kernel
    _write(up, "/etc/default/grub", pve_texts.DEFAULT_GRUB)
    _write(up, f"/boot/vmlinuz-{kernel}", f"Linux kernel {kernel} (gpuhost lab)\n")
    _write(up, f"/boot/initrd.img-{kernel}", "")
    _write(up, f"/boot/config-{kernel}", "CONFIG_VFIO=m\nCONFIG_VFIO_PCI=m\n")
    bootloader.write_grub_cfg(up, kernel)
    if state.boot in ("systemd-boot", "grub-pbt"):
        if state.boot == "systemd-boot":
            _write(up, paths.KERNEL_CMDLINE, pve_texts.ZFS_KERNEL_CMDLINE)
        else:
            _whiteout(up, paths.KERNEL_CMDLINE)
        _write(
            up,
            paths.ESP_LIST,
            "# This file is automatically generated by proxmox-boot-tool\n"
            + "".join(f"{u}\n" for u in state.esp_uuids),
        )
        bootloader.refresh_esps(up, kernel, grub=state.boot == "grub-pbt")
    else:
        _whiteout(up, paths.KERNEL_CMDLINE)
        _whiteout(up, paths.ESP_LIST)


def _modules(up: Path) -> None:
    _write(up, "/etc/modules", pve_texts.ETC_MODULES)
    mp = up / "etc" / "modprobe.d"
    mp.mkdir(parents=True, exist_ok=True)
    _make_opaque(mp)
    _write(up, "/etc/modprobe.d/pve-blacklist.conf", pve_texts.PVE_BLACKLIST)
    for path in ("/etc/modules-load.d", "/etc/initramfs-tools/modules.d"):
        d = up / path.lstrip("/")
        d.mkdir(parents=True, exist_ok=True)


def _pve_tree(up: Path, spec: NodeSpec, state: NodeState, secrets: NodeSecrets) -> None:
    node = spec.name
    base = f"/etc/pve/nodes/{node}"
    for sub in ("qemu-server", "lxc", "priv"):
        (up / base.lstrip("/") / sub).mkdir(parents=True, exist_ok=True)
    (up / "etc/pve/priv").mkdir(parents=True, exist_ok=True)
    os.chmod(up / "etc/pve/priv", 0o700)
    for link, target in (
        ("qemu-server", f"nodes/{node}/qemu-server"),
        ("lxc", f"nodes/{node}/lxc"),
        ("local", f"nodes/{node}"),
    ):
        dest = up / "etc/pve" / link
        if not dest.is_symlink():
            dest.symlink_to(target)
    storage = "local-zfs" if state.root_fs == "zfs" else "local-lvm"
    _write(
        up, "/etc/pve/storage.cfg", pve_texts.STORAGE_CFG_ZFS if state.root_fs == "zfs" else pve_texts.STORAGE_CFG_LVM
    )
    _write(up, "/etc/pve/user.cfg", f"user:root@pam:1:0:::root@{node}.lab::\n\ntoken:{secrets.token_id}:0:0::\n\n")
    _write(up, "/etc/pve/priv/token.cfg", f"{secrets.token_id} {secrets.token_secret}\n", mode=0o600)
    _write(up, "/etc/pve/priv/authkey.key", os.urandom(32).hex() + "\n", mode=0o600)
    _write(up, "/etc/pve/pve-root-ca.pem", secrets.ca_pem)
    _write(up, f"{base}/pve-ssl.pem", secrets.tls.cert_pem)
    _write(up, f"{base}/pve-ssl.key", secrets.tls.key_pem, mode=0o600)
    _write(up, "/etc/shadow", _shadow_with_root(secrets.root_password_hash), mode=0o640)
    vm = pve_texts.seed_vm_config(
        storage,
        spec.pve,
        str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, node + "/100")),
        str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, node + "/100/gen")),
        _mac(node),
    )
    _write(up, f"{base}/qemu-server/100.conf", vm)
    _write(up, f"/var/lib/vz/template/cache/{pve_texts.CT_TEMPLATE}", b"")
    for d in ("/var/lib/vz/images", "/var/lib/vz/dump", "/var/lib/vz/template/iso"):
        (up / d.lstrip("/")).mkdir(parents=True, exist_ok=True)


def install_node_library(target: Path) -> None:
    """The node-side Python code (stdlib only), installed once per lab; every node gets it
    read-only at /usr/lib/gpuhost-lab/python (bind mount at boot)."""
    lib = target / "gpuhost"
    if lib.exists():
        shutil.rmtree(lib)
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text('"""gpuhost lab node runtime (stdlib only)."""\n')
    (lib / "lab").mkdir()
    (lib / "lab" / "__init__.py").write_text('"""gpuhost lab (node side)."""\n')
    shutil.copytree(
        Path(node_pkg.__file__).parent, lib / "lab" / "node", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )


#: what only a PVE node has (a VM's guest gets the rest: reboot, systemctl, update-grub, update-initramfs)
PVE_ONLY_SHIMS = {"qm", "pct", "pvesh", "pveversion", "proxmox-boot-tool", "pvecm", "ha-manager"}


def _node_code(up: Path, guest: bool = False) -> None:
    (up / paths.PYTHONPATH.lstrip("/")).mkdir(parents=True, exist_ok=True)  # mount point of the library
    for command, (path, module) in SHIMS.items():
        if guest and command in PVE_ONLY_SHIMS:
            continue
        _write(
            up,
            path,
            (
                "#!/usr/bin/python3 -I\n"
                f"# {command}: Proxmox VE command simulated by the gpuhost lab\n"
                "import sys\n"
                f"sys.path.insert(0, {paths.PYTHONPATH!r})\n"
                f"from gpuhost.lab.node.cli.{module} import main\n"
                f"sys.exit(main(sys.argv[1:]))\n"
            ),
            mode=0o755,
        )
    _write(up, "/usr/local/bin/uname", UNAME_SHIM, mode=0o755)
    _write(up, "/usr/local/bin/dmesg", DMESG_SHIM, mode=0o755)
    _write(
        up,
        "/usr/bin/kvm",
        (
            "#!/usr/bin/python3 -I\n"
            "import sys\n"
            f"sys.path.insert(0, {paths.PYTHONPATH!r})\n"
            "from gpuhost.lab.node.kvm_process import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        ),
        mode=0o755,
    )


#: uname that reports the node's PVE kernel instead of the host's (state read from node.json).
UNAME_SHIM = r"""#!/bin/sh
# uname of a gpuhost lab node: the kernel is the node's, everything else comes from /usr/bin/uname
rel=$(sed -n 's/.*"kernel": "\([^"]*\)".*/\1/p' /var/lib/gpuhost-lab/node.json)
ver="#1 SMP PREEMPT_DYNAMIC PMX ${rel%-pve} (2024-11-06T15:04Z)"
[ $# -eq 0 ] && set -- -s
out=""
add() { out="${out:+$out }$1"; }
for arg in "$@"; do
  case "$arg" in
    --all) arg=-a ;; --kernel-name) arg=-s ;; --nodename) arg=-n ;; --kernel-release) arg=-r ;;
    --kernel-version) arg=-v ;; --machine) arg=-m ;; --operating-system) arg=-o ;;
    --help|--version) exec /usr/bin/uname "$arg" ;;
  esac
  flags=${arg#-}
  while [ -n "$flags" ]; do
    f=$(printf '%s' "$flags" | cut -c1); flags=${flags#?}
    case "$f" in
      a) add Linux; add "$(/usr/bin/uname -n)"; add "$rel"; add "$ver"; add x86_64; add GNU/Linux ;;
      s) add Linux ;; n) add "$(/usr/bin/uname -n)" ;; r) add "$rel" ;; v) add "$ver" ;;
      m|p|i) add x86_64 ;; o) add GNU/Linux ;;
      *) exec /usr/bin/uname "$arg" ;;
    esac
  done
done
printf '%s\n' "$out"
"""


#: dmesg of the node: this boot's kernel log (written by the supervisor), then what was logged since.
DMESG_SHIM = r"""#!/bin/sh
# dmesg of a gpuhost lab node: the kernel ring buffer of this boot
for arg in "$@"; do
  case "$arg" in
    -C|--clear) : > /run/gpuhost-lab-kmsg; exit 0 ;;
  esac
done
cat /run/gpuhost-lab-boot/dmesg /run/gpuhost-lab-kmsg 2>/dev/null
"""


def _checkout() -> set[str]:
    checkout = source_checkout()
    return {str(checkout)} if checkout is not None else set()


def _host_enabled_units() -> list[str]:
    """Units the host itself has enabled: a node never starts those (they are not PVE's)."""
    wants = Path("/etc/systemd/system/multi-user.target.wants")
    return sorted(p.name for p in wants.iterdir()) if wants.is_dir() else []


def _shadow_with_root(password_hash: str) -> str:
    lines = Path("/etc/shadow").read_text().splitlines()
    out = []
    for line in lines:
        fields = line.split(":")
        if fields and fields[0] == "root":
            fields[1] = password_hash
            line = ":".join(fields)
        out.append(line)
    return "\n".join(out) + "\n"


def _esp_uuid(name: str) -> str:
    h = uuidlib.uuid5(uuidlib.NAMESPACE_DNS, "esp." + name).hex.upper()
    return f"{h[:4]}-{h[4:8]}"


def _mac(name: str) -> str:
    h = uuidlib.uuid5(uuidlib.NAMESPACE_DNS, "mac." + name).hex.upper()
    return "BC:24:11:" + ":".join(h[i : i + 2] for i in range(0, 6, 2))


def _write(up: Path, path: str, content: str | bytes, mode: int = 0o644) -> None:
    target = up / path.lstrip("/")
    if not target.parent.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_char_device() or target.is_symlink():
        target.unlink()
    data = content.encode() if isinstance(content, str) else content
    target.write_bytes(data)
    os.chmod(target, mode)


def _whiteout(up: Path, path: str) -> None:
    """Hide a lower-layer file from the node (overlayfs whiteout: a 0/0 character device)."""
    target = up / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() or target.is_symlink():
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
    os.mknod(target, stat.S_IFCHR | 0o000, os.makedev(0, 0))


def _make_opaque(directory: Path) -> None:
    """Hide everything the lower layer has in this directory."""
    os.setxattr(directory, "trusted.overlay.opaque", b"y")
