"""The options ``qm``/``pct``/the API accept, their formats, and PVE's root-only rules."""

from __future__ import annotations

import re

from gpuhost.lab.node.errors import PveError, not_in_schema, param_error, perm_error
from gpuhost.lab.node.property_string import parse as parse_property_string

ROOT = "root@pam"

_QEMU_KEYS = re.compile(
    r"^(acpi|affinity|agent|amd-sev|arch|args|audio0|autostart|balloon|bios|boot|bootdisk|cdrom|cicustom|"
    r"cipassword|citype|ciupgrade|ciuser|cores|cpu|cpulimit|cpuunits|description|efidisk0|freeze|hookscript|"
    r"hostpci(?:[0-9]|1[0-5])|hotplug|hugepages|ide[0-3]|intel-tdx|ipconfig\d+|ivshmem|keephugepages|keyboard|"
    r"kvm|localtime|lock|machine|memory|meta|migrate_downtime|migrate_speed|name|nameserver|net\d+|numa|numa\d+|"
    r"onboot|ostype|parallel[0-2]|protection|reboot|rng0|sata[0-5]|scsi(?:[0-9]|[12][0-9]|30)|scsihw|"
    r"searchdomain|serial[0-3]|shares|smbios1|smp|sockets|spice_enhancements|sshkeys|startdate|startup|tablet|"
    r"tags|tdf|template|tpmstate0|unused\d+|usb\d+|vcpus|vga|virtio(?:[0-9]|1[0-5])|virtiofs\d|vmgenid|"
    r"vmstatestorage|watchdog)$"
)
_LXC_KEYS = re.compile(
    r"^(arch|cmode|console|cores|cpulimit|cpuunits|debug|description|dev(?:\d|\d\d|1\d\d|2[0-4]\d|25[0-5])|"
    r"entrypoint|env|features|hookscript|hostname|lock|memory|mp\d+|nameserver|net\d+|onboot|ostype|protection|"
    r"rootfs|searchdomain|startup|swap|tags|template|timezone|tty|unprivileged|unused\d+)$"
)
_INTEGER_KEYS = {"memory", "cores", "sockets", "vcpus", "balloon", "shares", "swap", "tty", "cpuunits"}
_BOOLEAN_KEYS = {
    "onboot",
    "numa",
    "protection",
    "template",
    "tablet",
    "acpi",
    "kvm",
    "localtime",
    "unprivileged",
    "console",
    "debug",
    "autostart",
    "reboot",
    "freeze",
}


def typed(options: dict[str, str]) -> dict[str, object]:
    """A config as the API's JSON returns it: integer and boolean options as numbers (PVE's JSON schema types
    them ``integer``/``boolean``: qemu-server PVE/QemuServer.pm $confdesc, pve-container PVE/LXC/Config.pm
    $confdesc)."""
    return {k: (int(v) if k in _INTEGER_KEYS | _BOOLEAN_KEYS and v.isdigit() else v) for k, v in options.items()}


_HOSTPCI_ID = re.compile(r"^(?:[a-f0-9]{4,}:)?[a-f0-9]{2}:[a-f0-9]{2}(?:\.[a-f0-9])?$", re.IGNORECASE)
_HOSTPCI_KEYS = {
    "host",
    "device-id",
    "driver",
    "legacy-igd",
    "mapping",
    "mdev",
    "pcie",
    "rombar",
    "romfile",
    "sub-device-id",
    "sub-vendor-id",
    "vendor-id",
    "x-vga",
}
_DEV_KEYS = {"path", "deny-write", "gid", "mode", "uid"}
_MACHINE = re.compile(
    r"^(?:type=)?(pc|pc(-i440fx)?-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|q35|pc-q35-\d+(\.\d+)+(\+pve\d+)?"
    r"(\.pxe)?|virt(?:-\d+(\.\d+)+)?)(,.*)?$"
)

# qemu-server API2/Qemu.pm check_vm_modify_config_perm: options an ordinary privilege covers.
_VM_PRIV_OPTIONS = {
    "cores",
    "cpu",
    "cpulimit",
    "cpuunits",
    "numa",
    "smp",
    "sockets",
    "vcpus",
    "affinity",
    "memory",
    "balloon",
    "shares",
    "acpi",
    "hotplug",
    "kvm",
    "machine",
    "scsihw",
    "smbios1",
    "tablet",
    "vga",
    "watchdog",
    "audio0",
    "rng0",
    "agent",
    "autostart",
    "bios",
    "description",
    "keyboard",
    "localtime",
    "migrate_downtime",
    "migrate_speed",
    "name",
    "onboot",
    "ostype",
    "protection",
    "reboot",
    "startdate",
    "startup",
    "tdf",
    "template",
    "freeze",
    "boot",
    "bootdisk",
    "vmstatestorage",
    "cicustom",
    "cipassword",
    "citype",
    "ciuser",
    "ciupgrade",
    "nameserver",
    "searchdomain",
    "sshkeys",
    "tags",
    "meta",
    "vmgenid",
    "spice_enhancements",
    "ivshmem",
    "hugepages",
    "keephugepages",
    "arch",
}
_VM_PRIV_PATTERNS = re.compile(
    r"^(net\d+|ipconfig\d+|numa\d+|unused\d+|serial\d|usb\d+|ide\d|sata\d+|scsi\d+|"
    r"virtio\d+|efidisk0|tpmstate0|parallel\d|virtiofs\d|cdrom)$"
)


def check_key(kind: str, key: str) -> None:
    pattern = _QEMU_KEYS if kind == "qemu" else _LXC_KEYS
    if not pattern.match(key):
        raise not_in_schema(key)


def check_value(kind: str, key: str, value: str) -> str:
    """Validate (and normalise, as PVE does for booleans) one option value."""
    if key in _INTEGER_KEYS and not re.fullmatch(r"\d+", value):
        raise param_error({key: f"type check ('integer') failed - got '{value}'"})
    if key in _BOOLEAN_KEYS:
        low = value.lower()
        if low in ("1", "on", "yes", "true"):
            return "1"
        if low in ("0", "off", "no", "false"):
            return "0"
        raise param_error({key: f"type check ('boolean') failed - got '{value}'"})
    if kind == "qemu" and key.startswith("hostpci"):
        _check_hostpci(key, value)
    if kind == "qemu" and key == "machine" and not _MACHINE.match(value):
        raise param_error({key: "value does not match the regex pattern"})
    if kind == "qemu" and key == "bios" and value not in ("seabios", "ovmf"):
        raise param_error({key: f"value '{value}' does not have a value in the enumeration 'seabios, ovmf'"})
    if kind == "lxc" and key.startswith("dev"):
        parse_device(key, value)
    return value


def parse_hostpci(value: str) -> dict[str, str]:
    return parse_property_string(value, "host")


def _check_hostpci(key: str, value: str) -> None:
    try:
        props = parse_hostpci(value)
    except ValueError as exc:
        raise param_error({key: str(exc)}) from None
    unknown = set(props) - _HOSTPCI_KEYS
    if unknown:
        raise param_error({key: f"invalid format - property '{sorted(unknown)[0]}' not defined in schema"})
    if "host" not in props and "mapping" not in props:
        raise param_error({key: "either 'host' or 'mapping' must be set."})
    for pci_id in props.get("host", "").split(";") if "host" in props else []:
        if not _HOSTPCI_ID.match(pci_id):
            raise param_error({key: f"invalid format - value does not match the regex pattern ('{pci_id}')"})


def parse_device(key: str, value: str) -> dict[str, str]:
    try:
        props = parse_property_string(value, "path")
    except ValueError as exc:
        raise param_error({key: str(exc)}) from None
    unknown = set(props) - _DEV_KEYS
    if unknown:
        raise param_error({key: f"invalid format - property '{sorted(unknown)[0]}' not defined in schema"})
    path = props.get("path", "")
    if not path.startswith("/dev/"):
        raise param_error({key: f"invalid format - {path} is not a valid path for device passthrough"})
    return props


# ---- permissions ---------------------------------------------------------------------------


def check_vm_modify_perm(authuser: str, keys: list[str], values: dict[str, str], current: dict[str, str]) -> None:
    """qemu-server's checks for setting or deleting options, for anyone but root@pam."""
    if authuser == ROOT:
        return
    for key in keys:
        if key.startswith("hostpci"):
            for value in (values.get(key), current.get(key)):
                if value is None:
                    continue
                props = parse_hostpci(value)
                if props.get("host") and not props.get("mapping"):
                    raise PveError(f"only root can set '{key}' config for non-mapped devices", http_status=500)
                if props.get("romfile"):
                    raise PveError(f"only root can set '{key}' config for non-mapped devices", http_status=500)
            continue
        if key in _VM_PRIV_OPTIONS or _VM_PRIV_PATTERNS.match(key):
            continue
        raise PveError(f"only root can set '{key}' config", http_status=500)


def check_ct_modify_perm(authuser: str, keys: list[str]) -> None:
    """pve-container's check_ct_modify_config_perm, for anyone but root@pam."""
    if authuser == ROOT:
        return
    for key in keys:
        if re.match(r"^dev\d+$", key):
            raise perm_error("configuring device passthrough is only allowed for root@pam")
        if key == "hookscript":
            raise perm_error("changing the hookscript is only allowed for root@pam")


def is_root_only_vm_key(key: str) -> bool:
    return not (key in _VM_PRIV_OPTIONS or _VM_PRIV_PATTERNS.match(key) or key.startswith("hostpci"))
