"""API token privileges as PVE's access control computes them, for the paths gpuhost uses.

- ``/etc/pve/user.cfg``: ``token:USER@REALM!NAME:EXPIRE:PRIVSEP:COMMENT:`` and
  ``acl:PROPAGATE:PATH:UGIDS:ROLES:`` (proxmox/pve-access-control src/PVE/AccessControl.pm
  ``parse_user_config``).
- A token without privilege separation has its user's privileges; one with it only what ACLs grant the
  token (src/PVE/RPCEnvironment.pm:136-175 ``permissions``); root@pam has every privilege (139-142).
- The most specific ACL path wins; an entry applies below its path only with ``propagate``
  (RPCEnvironment.pm ``compile_acl_path``).
- Built-in roles from ``$privgroups`` (AccessControl.pm:1057-1204 ``create_roles``).
- A missing privilege is ``raise_perm_exc("$path, $priv")``: 403 "Permission check failed (/vms/200,
  VM.Config.CPU)" (RPCEnvironment.pm:291-305 ``check``).
"""

from __future__ import annotations

import re

from gpuhost.lab.node.errors import perm_error

USER_CFG = "/etc/pve/user.cfg"

#: AccessControl.pm:1057-1164 $privgroups (the categories gpuhost's calls touch)
_GROUPS: dict[str, dict[str, list[str]]] = {
    "VM": {
        "root": [],
        "admin": [
            "VM.Config.Disk",
            "VM.Config.CPU",
            "VM.Config.Memory",
            "VM.Config.Network",
            "VM.Config.HWType",
            "VM.Config.Options",
            "VM.Allocate",
            "VM.Clone",
            "VM.GuestAgent.Unrestricted",
            "VM.Migrate",
            "VM.Replicate",
            "VM.Snapshot",
            "VM.Snapshot.Rollback",
        ],
        "user": [
            "VM.Config.CDROM",
            "VM.Config.Cloudinit",
            "VM.Console",
            "VM.Backup",
            "VM.GuestAgent.FileRead",
            "VM.GuestAgent.FileSystemMgmt",
            "VM.GuestAgent.FileWrite",
            "VM.PowerMgmt",
        ],
        "audit": ["VM.Audit", "VM.GuestAgent.Audit"],
    },
    "Sys": {
        "root": ["Sys.PowerMgmt", "Sys.Modify", "Sys.Incoming", "Sys.AccessNetwork"],
        "admin": ["Sys.Console", "Sys.Syslog"],
        "user": [],
        "audit": ["Sys.Audit"],
    },
    "Datastore": {
        "root": [],
        "admin": ["Datastore.Allocate", "Datastore.AllocateTemplate"],
        "user": ["Datastore.AllocateSpace"],
        "audit": ["Datastore.Audit"],
    },
}


def _roles() -> dict[str, set[str]]:
    """AccessControl.pm:1175-1204 create_roles."""
    every = {p for cat in _GROUPS.values() for level in cat.values() for p in level}
    roles: dict[str, set[str]] = {"NoAccess": set(), "Administrator": every, "PVEAdmin": set(), "PVEAuditor": set()}
    for cat, levels in _GROUPS.items():
        admin = set(levels["admin"]) | set(levels["user"]) | set(levels["audit"])
        roles[f"PVE{cat}Admin"] = admin
        roles["PVEAdmin"] |= admin
        if levels["user"]:
            roles[f"PVE{cat}User"] = set(levels["user"]) | set(levels["audit"])
        roles["PVEAuditor"] |= set(levels["audit"])
    roles["PVETemplateUser"] = {"VM.Clone", "VM.Audit"}
    return roles


ROLES = _roles()


def _config() -> tuple[dict[str, bool], list[tuple[bool, str, list[str], list[str]]]]:
    tokens: dict[str, bool] = {}
    acls: list[tuple[bool, str, list[str], list[str]]] = []
    try:
        text = open(USER_CFG).read()
    except OSError:
        return tokens, acls
    for line in text.splitlines():
        f = line.split(":")
        if f[0] == "token" and len(f) >= 4:
            tokens[f[1]] = f[3] == "1"
        elif f[0] == "acl" and len(f) >= 5:
            acls.append((f[1] == "1", f[2], [u for u in f[3].split(",") if u], [r for r in f[4].split(",") if r]))
    return tokens, acls


def privileges(authuser: str, path: str) -> set[str]:
    if authuser == "root@pam":
        return set(ROLES["Administrator"])
    tokens, acls = _config()
    if "!" in authuser:
        if authuser not in tokens:
            return set()
        user = authuser.split("!", 1)[0]
        if not tokens[authuser]:  # no privilege separation: the user's privileges
            return privileges(user, path)
    best: tuple[int, set[str]] | None = None
    for propagate, acl_path, ugids, roles in acls:
        if authuser not in ugids:
            continue
        base = acl_path.rstrip("/")
        exact = acl_path == path
        below = propagate and (acl_path == "/" or path.startswith(base + "/"))
        if not (exact or below):
            continue
        depth = len([p for p in acl_path.split("/") if p])
        privs = set().union(*(ROLES.get(r, set()) for r in roles))
        if best is None or depth > best[0]:
            best = (depth, privs)
        elif depth == best[0]:
            best[1].update(privs)
    return best[1] if best else set()


def check(authuser: str, path: str, privs: list[str]) -> None:
    have = privileges(authuser, path)
    for priv in privs:
        if priv not in have:
            raise perm_error(f"{path}, {priv}")


def ct_key_privilege(key: str) -> str:
    """pve-container src/PVE/LXC.pm:1661-1745 check_ct_modify_config_perm (the ACL part)."""
    if key in ("cores", "cpuunits", "cpulimit"):
        return "VM.Config.CPU"
    if key == "rootfs" or re.fullmatch(r"mp\d+", key):
        return "VM.Config.Disk"
    if key in ("memory", "swap"):
        return "VM.Config.Memory"
    if re.fullmatch(r"net\d+", key):
        return "VM.Config.Network"
    return "VM.Config.Options"


#: qemu-server src/PVE/API2/Qemu.pm:789-849: $cpuoptions, $memoryoptions, $hwtypeoptions, $generaloptions
_VM_CPU = {"cores", "cpu", "runningcpu", "cpulimit", "cpuunits", "numa", "smp", "sockets", "vcpus"}
_VM_MEMORY = {"memory", "balloon", "shares", "allow-ksm"}
_VM_HWTYPE = {"acpi", "hotplug", "kvm", "machine", "runningmachine", "scsihw", "smbios1", "tablet", "vga"}
_VM_HWTYPE |= {"watchdog", "audio0", "rng0"}
_VM_GENERAL = {"agent", "autostart", "bios", "description", "keyboard", "localtime", "migrate_downtime"}
_VM_GENERAL |= {"migrate_speed", "name", "onboot", "ostype", "protection", "reboot", "startdate", "startup"}
_VM_GENERAL |= {"tdf", "template"}


def vm_key_privilege(key: str) -> str | None:
    """qemu-server src/PVE/API2/Qemu.pm:995-1037 check_vm_modify_config_perm (the ACL part); None where the
    check is made elsewhere (drives, hostpciN, usbN: value dependent) or the key is root-only (schema.py)."""
    if re.fullmatch(r"(ide|sata|scsi|virtio|efidisk|tpmstate|unused|serial|usb|hostpci|virtiofs)\d+", key):
        return None
    if key in _VM_CPU or re.fullmatch(r"numa\d+", key):
        return "VM.Config.CPU"
    if key in _VM_MEMORY:
        return "VM.Config.Memory"
    if key in _VM_HWTYPE:
        return "VM.Config.HWType"
    if key in _VM_GENERAL:
        return "VM.Config.Options"
    if key in ("boot", "bootdisk", "vmstatestorage"):
        return "VM.Config.Disk"
    if re.fullmatch(r"net\d+", key):
        return "VM.Config.Network"
    return None
