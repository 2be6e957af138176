"""Containers: what ``pct`` and the ``/nodes/{node}/lxc`` API do to them."""

from __future__ import annotations

import os
import re

from gpuhost.lab.node import ct_runtime, formats, guests, pending, schema, tasks
from gpuhost.lab.node.errors import PveError, param_error
from gpuhost.lab.node.pveconf import GuestConfig, new_config
from gpuhost.lab.node.state import load as load_state

# pve-container's $LXC_FASTPLUG_OPTIONS plus what vmconfig_hotplug_pending changes live
_HOTPLUG = {
    "description",
    "onboot",
    "startup",
    "protection",
    "hostname",
    "hookscript",
    "cores",
    "tags",
    "lock",
    "memory",
    "swap",
    "cpulimit",
    "cpuunits",
}
TEMPLATE_DIR = "/var/lib/vz/template/cache"


def _hotpluggable(key: str) -> bool:
    return key in _HOTPLUG or bool(re.fullmatch(r"net\d+", key))


def config(vmid: int, current: bool = False, snapshot: str | None = None) -> dict[str, object]:
    conf = guests.load("lxc", vmid)
    if snapshot:
        snap = conf.snapshots.get(snapshot)
        if snap is None:
            raise PveError(f"snapshot '{snapshot}' does not exist")
        out: dict[str, object] = schema.typed(dict(snap.options))
        lxc = snap.lxc
    else:
        out = schema.typed(pending.current(conf) if current else pending.effective(conf))
        lxc = conf.main.lxc
    if lxc:
        out["lxc"] = [[k, v] for k, v in lxc]
    out["digest"] = conf.digest
    return out


def pending_view(vmid: int) -> list[dict[str, object]]:
    return pending.view(guests.load("lxc", vmid))


def status(vmid: int) -> dict[str, object]:
    conf = guests.load("lxc", vmid)
    cur = pending.current(conf)
    pid = ct_runtime.init_pid(vmid)
    out: dict[str, object] = {
        "vmid": vmid,
        "name": cur.get("hostname", f"CT{vmid}"),
        "status": "running" if pid else "stopped",
        "type": "lxc",
        "cpus": int(cur.get("cores", "1")),
        "maxmem": int(cur.get("memory", "512")) * 1048576,
        "maxswap": int(cur.get("swap", "512")) * 1048576,
        "uptime": 0,
        "ha": {"managed": 0},
    }
    if pid:
        out["pid"] = pid
    if conf.get("lock"):
        out["lock"] = conf.get("lock")
    return out


def list_cts() -> list[dict[str, object]]:
    out = []
    for vmid in guests.list_ids("lxc"):
        try:
            out.append(status(vmid))
        except PveError:
            continue
    return out


def check_params(params: dict[str, str]) -> None:
    """What PVE's API schema refuses before anything runs (also used by the API before it forks a task)."""
    _validate(dict(params))


def _validate(params: dict[str, str]) -> None:
    for key in list(params):
        if key.startswith("lxc."):
            raise param_error(
                {key: "property is not defined in schema and the schema does not allow additional properties"}
            )
        schema.check_key("lxc", key)
        params[key] = schema.check_value("lxc", key, params[key])
        if key == "hostname":
            formats.check_dns_name(key, params[key])
        if key == "rootfs" or re.fullmatch(r"mp\d+", key):
            _check_volume_string(key, params[key])
        if re.fullmatch(r"dev\d+", key):
            ct_runtime.device_node(schema.parse_device(key, params[key])["path"])


def _check_volume_string(key: str, value: str) -> None:
    """``[volume=]VOLUME[,opt=value...]``: a new ``STORAGE:SIZE``, an existing volume, or (mpN) a host path."""
    volume, _, rest = value.partition(",")
    volume = volume.removeprefix("volume=")
    formats.check_rootfs_options(key, rest)
    formats.check_mp_string(key, volume)
    if re.fullmatch(r"([\w\-]+):(\d+(?:\.\d+)?)", volume):
        if formats.storage_type(volume.split(":")[0]) is None:
            raise PveError(f"storage '{volume.split(':')[0]}' does not exist")
        return
    if volume.startswith("/") and key != "rootfs":
        if re.search(r"[^\w./\-+@:]", volume):
            raise param_error({key: f"invalid format - {volume} contains illegal characters"})
        return
    formats.check_volume_id(volume)


def update(
    vmid: int, params: dict[str, str], delete: list[str], revert: list[str], *, authuser: str, digest: str | None = None
) -> list[str]:
    _validate(params)
    deletes = [(k.lstrip("!"), k.startswith("!")) for k in delete]
    for key in revert:
        if key in params:  # API2/LXC/Config.pm:188-192
            raise param_error({"revert": f"you can't use '-{key}' and '-revert {key}' at the same time"})
    for key, _ in deletes:
        if key.startswith("lxc."):
            raise param_error({"delete": f"invalid format - invalid configuration ID '{key}'"})
        schema.check_key("lxc", key)
        if key in params:  # API2/LXC/Config.pm:199-201
            raise param_error({"delete": f"you can't use '-{key}' and -delete {key}' at the same time"})
        if key in revert:  # API2/LXC/Config.pm:203-208
            raise param_error({"delete": f"you can't use '-delete {key}' and '-revert {key}' at the same time"})
        if key in ("memory", "rootfs", "ostype"):
            raise PveError(f"unable to delete required option '{key}'")
    schema.check_ct_modify_perm(authuser, list(params) + [k for k, _ in deletes])
    with guests.locked("lxc", vmid):
        conf = guests.load("lxc", vmid)
        guests.check_digest("lxc", conf, digest)
        if "unprivileged" in params and params["unprivileged"] != conf.get("unprivileged", "0"):
            raise PveError("unable to modify read-only option: 'unprivileged'")
        for warning in pending.stage(conf, params, deletes, revert, delete_drops_pending=False):
            guests.warn(warning)
        if ct_runtime.running(vmid):
            # Config.pm:1624-1746 vmconfig_hotplug_pending: a new devN/mpN is hot-plugged (1721-1735,
            # "skip" when the key is already set); the rest of _HOTPLUG changes live
            new_keys = {k for k in (conf.pending.options if conf.pending else {}) if conf.get(k) is None}
            applied = pending.apply(
                conf, lambda key: _hotpluggable(key) or (bool(re.fullmatch(r"dev\d+", key)) and key in new_keys)
            )
            for key in applied:
                if re.fullmatch(r"dev\d+", key) and conf.get(key) is not None:
                    ct_runtime.hotplug_device(vmid, schema.parse_device(key, str(conf.get(key))))
        else:
            pending.apply(conf)
        guests.save("lxc", vmid, conf)
        left = conf.pending
        return sorted(k for k in (left.options if left else {}) if k != "delete")


def create(vmid: int, ostemplate: str, params: dict[str, str], *, authuser: str) -> list[str]:
    """pct create / POST /nodes/{node}/lxc; returns the task log lines."""
    storage = params.pop("storage", "local")
    _validate(params)
    schema.check_ct_modify_perm(authuser, list(params))
    template = _template_path(ostemplate)
    state = load_state()
    default_store = "local-zfs" if state.root_fs == "zfs" else "local-lvm"
    rootfs = params.pop("rootfs", f"{storage if storage != 'local' else default_store}:4")
    m = re.fullmatch(r"([\w\-]+):(\d+(?:\.\d+)?)(,.*)?", rootfs)
    if m:
        store, size, rest = m.group(1), m.group(2), m.group(3) or ""
        volume = f"subvol-{vmid}-disk-0" if store.endswith("zfs") else f"vm-{vmid}-disk-0"
        rootfs = f"{store}:{volume}{rest},size={size}G"
    options = {
        "arch": "amd64",
        "ostype": "debian",
        "hostname": f"CT{vmid}",
        "memory": "512",
        "swap": "512",
        "rootfs": rootfs,
    }
    options.update(params)
    conf = new_config("lxc", options)
    guests.create("lxc", vmid, conf)
    ct_runtime.create_rootfs(vmid, options["hostname"])
    _record_init(vmid, template)
    lines = [f"extracting archive '{template}'", "Detected container architecture: amd64"]
    # Setup.pm:322-330 post_create_hook → check_systemd_nesting, as log_warn
    return lines + _systemd_nesting_warning(vmid, options)


#: The systemd each template's init is (what pve-container's Setup/Base.pm:600-627
#: ``get_systemd_version`` reads with objdump from the CT's /sbin/init): Debian's and Ubuntu's
#: systemd package in that release (packages.debian.org: bullseye 247, bookworm 252, trixie 257;
#: packages.ubuntu.com: jammy 249, noble 255). The lab's CT rootfs is not the template's, so the
#: version is recorded from the template's name at create.
_TEMPLATE_SYSTEMD = {"debian-11": 247, "debian-12": 252, "debian-13": 257, "ubuntu-22.04": 249, "ubuntu-24.04": 255}


def _init_file(vmid: int) -> str:
    return str(ct_runtime.ct_dir(vmid) / "init-systemd-version")


def _record_init(vmid: int, template: str) -> None:
    name = os.path.basename(template)
    version = next((v for prefix, v in _TEMPLATE_SYSTEMD.items() if name.startswith(prefix + "-")), None)
    if version is not None:
        with open(_init_file(vmid), "w") as fh:
            fh.write(f"{version}\n")


def _systemd_nesting_warning(vmid: int, options: dict[str, str]) -> list[str]:
    """pve-container Setup/Base.pm:659-676 ``check_systemd_nesting``: no ``nesting`` in ``features`` and
    the CT's init is systemd newer than 241 → "Systemd N detected. You may need to enable nesting.",
    a task warning (Setup.pm:299-306 ``log_warn``; the task ends ``WARNINGS: 1``)."""
    features = dict(part.split("=", 1) for part in options.get("features", "").split(",") if "=" in part)
    if features.get("nesting") in ("1", "true", "yes", "on"):
        return []
    try:
        version = int(open(_init_file(vmid)).read().strip())
    except (OSError, ValueError):
        return []
    if version <= 241:
        return []
    return [tasks.warn(f"Systemd {version} detected. You may need to enable nesting.")]


def _template_path(ostemplate: str) -> str:
    if ostemplate.startswith("/"):
        formats.check_mp_string("ostemplate", ostemplate)
        path = ostemplate
    else:
        m = re.fullmatch(r"([\w\-]+):(.+)", ostemplate, re.DOTALL)
        if not m:
            raise PveError(f"unable to parse volume ID '{ostemplate}'")
        if m.group(1) not in ("local", "local-lvm", "local-zfs"):
            raise PveError(f"storage '{m.group(1)}' does not exist")
        volname = m.group(2)
        if not re.fullmatch(r"vztmpl/[^/\s]+\.tar\.(?:gz|xz|zst|bz2)", volname) or volname.startswith("vztmpl/.."):
            raise PveError(f"unable to parse directory volume name '{m.group(2)}'")
        if m.group(1) != "local":
            raise PveError(f"storage '{m.group(1)}' does not support container templates")
        path = f"{TEMPLATE_DIR}/{m.group(2).removeprefix('vztmpl/')}"
    if not os.path.exists(path):
        raise PveError(f"volume '{ostemplate}' does not exist")
    return path


def destroy(vmid: int) -> None:
    conf = guests.load("lxc", vmid)
    if ct_runtime.running(vmid):
        raise PveError(f"CT {vmid} is running - destroy failed")
    if conf.get("protection") == "1":
        raise PveError(f"can't remove CT {vmid} - protection mode enabled")
    ct_runtime.remove_rootfs(vmid)
    guests.remove("lxc", vmid)


def start(vmid: int) -> list[str]:
    """pct start / POST status/start; returns the task log lines."""
    with guests.locked("lxc", vmid):
        conf = guests.load("lxc", vmid)
        if ct_runtime.running(vmid):
            raise PveError(f"CT {vmid} already running")
        if conf.pending is not None:
            pending.apply(conf)
            guests.save("lxc", vmid, conf)
        hide = list(load_state().extra.get("hide_paths", []))
        options = pending.current(conf)
        ct_runtime.start(vmid, options, conf.main.lxc, hide)
        # Setup.pm:308-313 pre_start_hook → check_systemd_nesting; LXC.pm:3177 print_ct_warn_log
        return _systemd_nesting_warning(vmid, options)


def stop(vmid: int) -> None:
    guests.load("lxc", vmid)
    if not ct_runtime.running(vmid):
        raise PveError(f"CT {vmid} not running")
    ct_runtime.stop(vmid)


def shutdown(vmid: int) -> None:
    stop(vmid)


def reboot(vmid: int) -> list[str]:
    guests.load("lxc", vmid)
    if not ct_runtime.running(vmid):
        raise PveError(f"CT {vmid} not running")
    ct_runtime.stop(vmid)
    return start(vmid)


def storage_content(storage: str, content: str | None) -> list[dict[str, object]]:
    if storage != "local":
        return []
    out: list[dict[str, object]] = []
    if content in (None, "vztmpl") and os.path.isdir(TEMPLATE_DIR):
        for name in sorted(os.listdir(TEMPLATE_DIR)):
            out.append(
                {
                    "volid": f"local:vztmpl/{name}",
                    "content": "vztmpl",
                    "format": "tzst",
                    "size": os.path.getsize(f"{TEMPLATE_DIR}/{name}"),
                    "ctime": 1731337200,
                }
            )
    return out


def conf_of(vmid: int) -> GuestConfig:
    return guests.load("lxc", vmid)
