"""Virtual machines: what ``qm`` and the ``/nodes/{node}/qemu`` API do to them.

The VM's process is /usr/bin/kvm of the node (see :mod:`kvm_process`): it carries the command
line :mod:`kvm_cmdline` renders and lives as long as the VM "runs" (a node reboot ends it).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

from gpuhost.lab.node import guests, kvm_cmdline, pending, schema
from gpuhost.lab.node.errors import PveError, param_error
from gpuhost.lab.node.pveconf import GuestConfig, new_config
from gpuhost.lab.node.state import load as load_state

RUN_DIR = "/var/run/qemu-server"
# qemu-server's $fast_plug_option: applied to a running VM at once
_FAST_PLUG = {
    "name",
    "hotplug",
    "onboot",
    "shares",
    "startup",
    "description",
    "protection",
    "vmstatestorage",
    "hookscript",
    "tags",
    "lock",
    "cpulimit",
    "cpuunits",
}


def _hotpluggable(conf: GuestConfig, key: str) -> bool:
    if key in _FAST_PLUG:
        return True
    hotplug = (conf.get("hotplug") or "network,disk,usb").split(",")
    if hotplug == ["1"]:
        hotplug = ["network", "disk", "usb"]
    if re.fullmatch(r"net\d+", key):
        return "network" in hotplug
    if re.fullmatch(r"(scsi|virtio|sata|unused)\d+", key):
        return "disk" in hotplug
    if re.fullmatch(r"usb\d+", key):
        return "usb" in hotplug
    if key == "memory":
        return "memory" in hotplug
    if key in ("cores", "vcpus"):
        return "cpu" in hotplug
    return False


# ---- reading ---------------------------------------------------------------------------------


def config(vmid: int, current: bool = False, snapshot: str | None = None) -> dict[str, object]:
    conf = guests.load("qemu", vmid)
    if snapshot:
        snap = conf.snapshots.get(snapshot)
        if snap is None:
            raise PveError(f"snapshot '{snapshot}' does not exist")
        out: dict[str, str] = dict(snap.options)
        if snap.description is not None:
            out["description"] = snap.description
    else:
        out = pending.current(conf) if current else pending.effective(conf)
    result = schema.typed(out)
    result["digest"] = conf.digest
    return result


def pending_view(vmid: int) -> list[dict[str, object]]:
    return pending.view(guests.load("qemu", vmid))


def running_pid(vmid: int) -> int | None:
    try:
        pid = int(open(f"{RUN_DIR}/{vmid}.pid").read().strip())
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except (OSError, ValueError):
        return None
    if b"/usr/bin/kvm" in cmdline and str(vmid).encode() in cmdline:
        return pid
    return None


def status(vmid: int) -> dict[str, object]:
    conf = guests.load("qemu", vmid)
    pid = running_pid(vmid)
    cur = pending.current(conf)
    mtype, _ = kvm_cmdline.machine_type(cur)
    out: dict[str, object] = {
        "vmid": vmid,
        "name": cur.get("name", f"VM {vmid}"),
        "status": "running" if pid else "stopped",
        "qmpstatus": "running" if pid else "stopped",
        "cpus": int(cur.get("cores", "1")) * int(cur.get("sockets", "1")),
        "maxmem": int(cur.get("memory", "512").split(",")[0].replace("current=", "")) * 1024 * 1024,
        "uptime": 0,
        "maxdisk": bootdisk_size(cur),
        "ha": {"managed": 0},
    }
    if pid:
        out["pid"] = pid
        out["uptime"] = int(time.time() - os.stat(f"/proc/{pid}").st_mtime)
        qemu_version = {8: "9.0.2", 9: "10.0.2"}.get(load_state().pve, "9.0.2")
        family = "pc-q35" if mtype.startswith(("q35", "pc-q35")) else "pc-i440fx"
        out["running-machine"] = (
            mtype if mtype[:2] == "pc" and mtype[2:3] == "-" else f"{family}-{qemu_version.rsplit('.', 1)[0]}+pve0"
        )
        out["running-qemu"] = qemu_version
    return out


_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def bootdisk_size(cur: dict[str, str]) -> int:
    """Bytes of the first disk of the boot order that is not a CD-ROM, from its ``size=`` (qemu-server's
    ``bootdisk_size``, the BOOTDISK column of ``qm list``); 0 without one."""
    order = re.search(r"(?:^|,)order=([^,]+)", cur.get("boot", ""))
    keys = order[1].split(";") if order else [cur.get("bootdisk", "")]
    for key in keys:
        value = cur.get(key, "")
        if not re.fullmatch(r"(ide|sata|scsi|virtio)\d+", key) or not value or "media=cdrom" in value:
            continue
        m = re.search(r"(?:^|,)size=(\d+(?:\.\d+)?)([KMGT]?)(?:,|$)", value)
        return int(float(m[1]) * _SIZE_UNITS[m[2]]) if m else 0
    return 0


def showcmd(vmid: int, pretty: bool = False) -> str:
    conf = guests.load("qemu", vmid)
    return kvm_cmdline.render(kvm_cmdline.build(vmid, pending.current(conf)), pretty)


# ---- changing --------------------------------------------------------------------------------


def update(
    vmid: int,
    params: dict[str, str],
    delete: list[str],
    revert: list[str],
    *,
    authuser: str,
    digest: str | None = None,
    skiplock: bool = False,
) -> list[str]:
    """qm set / PUT config. Returns the keys still pending (non-hotpluggable on a running VM)."""
    for key in list(params):
        schema.check_key("qemu", key)
        params[key] = schema.check_value("qemu", key, params[key])
    deletes = [(k.lstrip("!"), k.startswith("!")) for k in delete]
    for key in revert:
        if key in params:  # API2/Qemu.pm:2124-2126
            raise param_error({"delete": f"you can't use '-{key}' and -revert {key}' at the same time"})
    for key, _ in deletes:
        schema.check_key("qemu", key)
        if key in params:  # API2/Qemu.pm:2135-2137
            raise param_error({"delete": f"you can't use '-{key}' and -delete {key}' at the same time"})
        if key in revert:  # API2/Qemu.pm:2139-2141
            raise param_error({"revert": f"you can't use '-delete {key}' and -revert {key}' at the same time"})
    if skiplock and authuser != schema.ROOT:
        raise PveError(
            "Only root may use this option.", http_status=400, errors={"skiplock": "Only root may use this option."}
        )
    with guests.locked("qemu", vmid):
        conf = guests.load("qemu", vmid)
        guests.check_digest("qemu", conf, digest)
        guests.check_lock(conf, vmid, skiplock)
        schema.check_vm_modify_perm(
            authuser, list(params) + [k for k, _ in deletes] + revert, params, pending.effective(conf)
        )
        for warning in pending.stage(conf, params, deletes, revert, delete_drops_pending=True):
            guests.warn(warning)
        if running_pid(vmid):
            pending.apply(conf, lambda key: _hotpluggable(conf, key))
        else:
            pending.apply(conf)
        guests.save("qemu", vmid, conf)
        left = conf.pending
        return sorted(k for k in (left.options if left else {}) if k != "delete")


def create(vmid: int, params: dict[str, str]) -> None:
    for key in list(params):
        schema.check_key("qemu", key)
        params[key] = schema.check_value("qemu", key, params[key])
    params.setdefault("smbios1", f"uuid={_uuid()}")
    params.setdefault("vmgenid", _uuid())
    guests.create("qemu", vmid, new_config("qemu", params))


def destroy(vmid: int) -> None:
    if running_pid(vmid):
        raise PveError(f"VM {vmid} is running - destroy failed")
    guests.load("qemu", vmid)
    guests.remove("qemu", vmid)


def start(vmid: int, skiplock: bool = False) -> None:
    with guests.locked("qemu", vmid):
        conf = guests.load("qemu", vmid)
        if running_pid(vmid):
            raise PveError(f"VM {vmid} already running")
        guests.check_lock(conf, vmid, skiplock)
        if conf.pending is not None:  # a cold start applies every pending change
            pending.apply(conf)
            guests.save("qemu", vmid, conf)
        argv = kvm_cmdline.build(vmid, pending.current(conf))
        devices: list[str] = []
        for index, value in sorted(pending.current(conf).items()):
            if index.startswith("hostpci"):
                devices += _check_devices_present(value)
        os.makedirs(RUN_DIR, exist_ok=True)
        _reserve_pci(devices, vmid)
        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        deadline = time.monotonic() + 5
        while running_pid(vmid) is None:
            if time.monotonic() > deadline:
                raise PveError("start failed: QEMU exited with code 1")
            time.sleep(0.01)
        _reserve_pci(devices, vmid, running_pid(vmid))
        _tell_supervisor("vm-start", vmid, argv)


def _tell_supervisor(verb: str, vmid: int, argv: list[str] | None = None) -> None:
    """The lab's supervisor boots (or stops) the VM's simulated guest, if the lab has one for it."""
    import json
    import socket

    from gpuhost.lab.node import paths

    line = " ".join([verb, str(vmid), *([json.dumps(argv)] if argv is not None else [])]) + "\n"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(paths.SUPERVISOR_SOCKET)
            sock.sendall(line.encode())
            reply = sock.makefile("r").readline().strip()
    except OSError:
        return  # no supervisor (a node under test without one): the kvm process alone is the VM
    if not reply.startswith("ok"):
        raise PveError(f"VM {vmid}: the guest did not {verb.removeprefix('vm-')}: {reply}")


def _check_devices_present(value: str) -> list[str]:
    """The host functions a hostpciN entry passes (every function of a slot named without one)."""
    from gpuhost.lab.node import pci

    props = schema.parse_hostpci(value)
    out: list[str] = []
    for pci_id in props.get("host", "").split(";") if props.get("host") else []:
        found = pci.functions(pci_id)
        if not found:
            raise PveError(f"no PCI device found for '{pci_id}'")
        out += found
    return out


#: qemu-server's PCI reservations: ``$PCIID_RESERVATION_FILE = "${RUNDIR}/pci-id-reservations"`` with
#: ``$RUNDIR = '/run/qemu-server'`` (PVE/QemuServer/PCI.pm), one ``ID VMID pid:PID`` (or ``time:T``) line per device
PCI_RESERVATIONS = "/run/qemu-server/pci-id-reservations"


def _reserve_pci(devices: list[str], vmid: int, pid: int | None = None) -> None:
    """qemu-server's ``reserve_pci_usage`` (PVE/QemuServer/PCI.pm), as ``vm_start`` calls it (PVE/QemuServer.pm):
    before the kvm process, every PCI id is reserved for the VM; an id reserved by another VMID whose kvm process
    (the reservation's pid) still runs is refused with "PCI device '…' already in use by VMID '…'"; a reservation
    whose process is gone is "leftover" and taken. Once the VM runs, the reservation records its pid. (The time-
    based reservation PVE holds while the VM starts is not modelled: the lab's start is one step.)"""
    if not devices:
        return
    reservations: dict[str, tuple[int, int | None]] = {}
    try:
        for line in open(PCI_RESERVATIONS).read().splitlines():
            m = re.fullmatch(r"(\S+) (\d+) (time|pid):(\d+)", line)
            if m:
                reservations[m.group(1)] = (int(m.group(2)), int(m.group(4)) if m.group(3) == "pid" else None)
    except OSError:
        pass
    for dev in devices:
        held = reservations.get(dev)
        if held and held[0] != vmid and held[1] is not None and running_pid(held[0]) == held[1]:
            raise PveError(f"PCI device '{dev}' already in use by VMID '{held[0]}'")
        if pid is not None:
            reservations[dev] = (vmid, pid)
    if pid is None:
        return
    os.makedirs(os.path.dirname(PCI_RESERVATIONS), exist_ok=True)
    text = "".join(f"{dev} {v} pid:{p}\n" for dev, (v, p) in sorted(reservations.items()) if p is not None)
    with open(PCI_RESERVATIONS + ".tmp", "w") as fh:
        fh.write(text)
    os.replace(PCI_RESERVATIONS + ".tmp", PCI_RESERVATIONS)


def stop(vmid: int, skiplock: bool = False) -> None:
    guests.load("qemu", vmid)
    pid = running_pid(vmid)
    if pid is None:
        return
    _terminate(pid, vmid)


def shutdown(vmid: int, timeout: int | None = None) -> None:
    guests.load("qemu", vmid)
    pid = running_pid(vmid)
    if pid is None:
        raise PveError(f"VM {vmid} not running")
    _terminate(pid, vmid)


def _terminate(pid: int, vmid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 5
    while running_pid(vmid) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    if running_pid(vmid) is not None:
        os.kill(pid, signal.SIGKILL)
    try:
        os.unlink(f"{RUN_DIR}/{vmid}.pid")
    except OSError:
        pass
    _tell_supervisor("vm-stop", vmid)


def list_vms() -> list[dict[str, object]]:
    out = []
    for vmid in guests.list_ids("qemu"):
        try:
            st = status(vmid)
        except PveError:
            continue
        out.append(
            {
                "vmid": vmid,
                "name": st["name"],
                "status": st["status"],
                "cpus": st["cpus"],
                "maxmem": st["maxmem"],
                "maxdisk": st["maxdisk"],
                "uptime": st["uptime"],
                **({"pid": st["pid"]} if "pid" in st else {}),
            }
        )
    return out


def _uuid() -> str:
    import uuid

    return str(uuid.uuid4())
