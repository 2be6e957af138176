"""Value formats PVE checks before it acts, with PVE's own messages.

* ``dns-name`` (pve-common ``pve_verify_dns_name``): a container's ``hostname`` and a VM's ``name``;
* volume IDs (``pve_verify_volume_id``, the storage plugins' ``parse_volname``);
* mount point strings (pve-container ``verify_lxc_mp_string``): no ``/../``, ``/./`` or leading ``../``.

The lab is stricter than PVE in one respect: a volume name with characters outside
``[A-Za-z0-9_.-]`` (shell metacharacters, whitespace) is refused outright, since no volume
PVE allocates is ever named so. (PVE's dns-name regex ends in Perl's ``$``, which tolerates one
trailing newline; the lab refuses every newline.)
"""

from __future__ import annotations

import re

from gpuhost.lab.node.errors import PveError, param_error

_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?"
_DNS_NAME = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}")
_STORAGE_ID = re.compile(r"[a-z][a-z0-9\-_.]*[a-z0-9]", re.IGNORECASE)
_SAFE_VOLNAME = re.compile(r"[A-Za-z0-9_.\-/]+")
_SIZE = re.compile(r"\d+(?:\.\d+)?[KMGT]?")
_ROOTFS_KEYS = {"volume", "acl", "mountoptions", "quota", "replicate", "ro", "shared", "size", "mp", "backup"}
_VOLNAME = {
    "lvm": (re.compile(r"(?:vm|base)-\d+-[\w.\-]+"), "lvm"),
    "zfs": (re.compile(r"(?:(?:base|basevol)-\d+-[\w.\-]+/)?(?:base|basevol|vm|subvol)-\d+-[\w.\-]+"), "zfs"),
    "dir": (re.compile(r"(?:images/)?\d+/(?:vm|base|subvol|basevol)-\d+-[\w.\-]+"), "directory"),
}


def storage_type(storage: str) -> str | None:
    """The type of the lab's storages (local: dir, local-lvm: lvmthin, local-zfs: zfspool)."""
    return {"local": "dir", "local-lvm": "lvm", "local-zfs": "zfs"}.get(storage)


def check_dns_name(key: str, value: str) -> str:
    if len(value) > 255:
        raise param_error({key: "value may only be 255 characters long"})
    if not _DNS_NAME.fullmatch(value):
        raise param_error({key: "invalid format - value does not look like a valid DNS name"})
    return value


def check_mp_string(key: str, value: str) -> str:
    if re.search(r"/\.\.?/", value) or re.search(r"/\.\.?$", value) or re.match(r"\.\.?/", value):
        raise param_error({key: f"invalid format - {value} contains illegal character sequences"})
    return value


def check_volume_id(volid: str) -> tuple[str, str]:
    """``(storage, volname)`` of ``STORAGE:VOLNAME``, as ``parse_volume_id`` and the plugin would accept it."""
    storage, sep, volname = volid.partition(":")
    if not sep or not _STORAGE_ID.fullmatch(storage) or not volname:
        raise PveError(f"unable to parse volume ID '{volid}'")
    kind = storage_type(storage)
    if kind is None:
        raise PveError(f"storage '{storage}' does not exist")
    pattern, label = _VOLNAME[kind]
    if ".." in volname.split("/") or not _SAFE_VOLNAME.fullmatch(volname) or not pattern.fullmatch(volname):
        raise PveError(f"unable to parse {label} volume name '{volname}'")
    return storage, volname


def check_rootfs_options(key: str, rest: str) -> None:
    """The ``,key=value`` part of a ``rootfs``/``mpN`` property string."""
    for item in (p for p in rest.split(",") if p):
        name, eq, value = item.partition("=")
        if not eq or name not in _ROOTFS_KEYS:
            raise param_error({key: f"invalid format - invalid key in comma-separated list property: {name}"})
        if name == "size" and not _SIZE.fullmatch(value):
            raise param_error({key: f"invalid format - unable to parse size '{value}'"})
        if name == "mp":
            check_mp_string(key, value)
        if name in ("acl", "quota", "replicate", "ro", "shared", "backup") and value not in ("0", "1"):
            raise param_error({key: f"invalid format - type check ('boolean') failed - got '{value}'"})
        if name == "mountoptions" and not re.fullmatch(r"[a-z;]+", value):
            raise param_error({key: f"invalid format - value '{value}' does not match the regex pattern"})


def check_qemu_params(params: dict[str, str]) -> None:
    """The formats qm/the API check for a VM's options (the rest is :mod:`schema`'s)."""
    if "name" in params:
        check_dns_name("name", params["name"])
