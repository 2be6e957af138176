"""LXC guests on a Proxmox VE node: created, GPUs passed through, running, restarted only when allowed.

Changes go through PVE's API (:mod:`gpuhost.pve.api`): ordinary keys with the inventory's API
token when there is one, ``devN`` as root (PVE lets only ``root@pam`` set device passthrough), each
call with the ``digest`` of the config it was planned from. Raw ``lxc.*`` keys have no API at all: they
are written into the file under PVE's per-guest lock, after a digest re-check (:mod:`gpuhost.pve.edit`).
Pending values are part of the state compared.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from gpuhost.core.actions import (
    CopyToGuest,
    EditGuestConfig,
    PveCall,
    RestartGuest,
)
from gpuhost.core.guest import Guest
from gpuhost.core.operation import Args, Operation, SkipTask
from gpuhost.core.plan import Plan, nothing, unified_diff
from gpuhost.errors import OperationFailed
from gpuhost.facts import files as file_facts
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.facts.pve import ct_config, ct_config_path, ct_status, node_name, pve_version, vztemplates
from gpuhost.inventory.models import ContainerResources, DeviceGid, GuestId, Hostname, StorageId
from gpuhost.operations.guest import InGuestArgs, InGuestOperation
from gpuhost.pve import config as pveconf
from gpuhost.pve import edit

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

BACKUP_DIR = "/var/backups/gpuhost"


class ContainerArgs(Args, ContainerResources):
    """The container's id, name, template and storage, and its PVE settings (declared once, in the inventory's
    :class:`~gpuhost.inventory.models.ContainerResources`)."""

    ctid: GuestId = Field(description="the container's id (100..999999999)")
    hostname: Hostname = Field(description="DNS name of the container")
    template: str = Field(
        default="auto", description="OS template volid, or auto: the newest Debian 12 template on storage"
    )
    storage: StorageId = Field(default="local", description="storage holding container templates")


def pick_template(volids: list[str]) -> str | None:
    """The newest Debian 12 template, else the newest template of any kind."""
    debian = [v for v in volids if "debian-12" in v]
    pool = debian or volids
    return sorted(pool)[-1] if pool else None


class LxcContainer(Operation[ContainerArgs]):
    """The container exists with these resources (created from a template when absent)."""

    kind = "lxc_container"
    Args = ContainerArgs

    def wanted(self) -> dict[str, str]:
        a = self.args
        opts = {
            "hostname": a.hostname,
            "cores": str(a.cores),
            "memory": str(a.memory),
            "swap": str(a.swap),
            "onboot": "1" if a.onboot else "0",
        }
        if a.features:
            opts["features"] = a.features
        return opts

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        status = host.fact(ct_status, a.ctid)
        if status is None:
            template = a.template
            if template == "auto":
                template = pick_template(host.fact(vztemplates, a.storage)) or ""
                if not template:
                    raise OperationFailed(
                        f"no container template on storage '{a.storage}' of {host.name}: "
                        "download one (pveam update; pveam download local debian-12-standard…) "
                        "or set the container's template"
                    )
            opts = {
                "vmid": str(a.ctid),
                "ostemplate": template,
                **self.wanted(),
                "rootfs": a.rootfs,
                "unprivileged": "1" if a.unprivileged else "0",
            }
            if a.net0:
                opts["net0"] = a.net0
            node = host.fact(node_name)
            return Plan(
                reason=f"create CT {a.ctid} from {template}",
                actions=[PveCall("post", f"nodes/{node}/lxc", tuple(opts.items()))],
            )
        conf = host.fact(ct_config, a.ctid)
        assert conf is not None
        if conf.get("unprivileged", "0") != ("1" if a.unprivileged else "0"):
            raise OperationFailed(
                f"CT {a.ctid} is {'un' if conf.get('unprivileged') == '1' else ''}privileged; "
                "PVE cannot change that in place (back up, restore with --unprivileged)"
            )
        wanted: dict[str, str | None] = dict(self.wanted())
        change = edit.drift(conf, wanted, edit.LXC_DEFAULTS)
        if not change.changes:
            return _settled(a.ctid, status, change.waiting, f"CT {a.ctid} exists ({status})")
        node = host.fact(node_name)
        params = change.params()
        return Plan(
            reason=f"CT {a.ctid}: set {', '.join(change.set)}",
            actions=[PveCall("put", f"nodes/{node}/lxc/{a.ctid}/config", params, digest=conf.digest)],
            diff=_config_diff(a.ctid, conf.text(), edit.apply_params(conf, params, running=status == "running")),
        )


def _settled(ctid: int, status: str | None, waiting: list[str], reason: str) -> Plan:
    """Nothing to change; pending values that are already the wanted ones wait for the next start."""
    if not waiting:
        return nothing(reason)
    keys = ", ".join(waiting)
    if status == "running":
        return Plan(
            reason=f"{reason}; waiting for restart: {keys} staged (pending) until CT {ctid} restarts",
            waiting=(Guest.ct(ctid),),
        )
    return nothing(f"{reason}; {keys} staged (pending): applies at its next start")


def _config_diff(ctid: int, before: str, after: pveconf.GuestConfig) -> str:
    return unified_diff(ct_config_path(ctid), before, after.text())


class DevicesArgs(Args):
    ctid: int = Field(description="the container's id")
    devices: list[str] = Field(
        description="host device paths passed through as devN entries, e.g. /dev/nvidia0, /dev/nvidiactl"
    )
    gid: DeviceGid = Field(
        default=44, description="group owning the devices inside the container (44: video in Debian)"
    )
    memlock_unlimited: bool = Field(
        default=True, description="lift the locked-memory limit (ulimit -l) that CUDA pinned memory needs"
    )


def dev_entries(devices: list[str], gid: int) -> dict[str, str]:
    return {f"dev{i}": f"{path},gid={gid}" for i, path in enumerate(devices)}


def _driver_of(device: str) -> str:
    """The /proc/devices name that owns a node, from its directory first (never a name prefix)."""
    if device.startswith("/dev/nvidia-caps-imex-channels/"):
        return "nvidia-caps-imex-channels"
    if device.startswith("/dev/nvidia-caps/"):
        return "nvidia-caps"
    name = device.rsplit("/", 1)[-1]
    if name.startswith("nvidia-uvm"):
        return "nvidia-uvm"
    if name.startswith("nvidia-nvswitch"):
        return "nvidia-nvswitch"
    return "nvidia"


def device_major(device: str, majors: dict[str, int], numbers: Mapping[str, tuple[int, int]] | None = None) -> int:
    """The char major of a device node: its own (``stat``) when known, else /proc/devices' (never hard-coded)."""
    if numbers and device in numbers:
        return numbers[device][0]
    driver = _driver_of(device)
    if driver not in majors:
        raise OperationFailed(f"/proc/devices lists no '{driver}' major: load the NVIDIA modules on the host first")
    return majors[driver]


def legacy_lines(
    devices: list[str],
    majors: dict[str, int],
    numbers: Mapping[str, tuple[int, int]] | None = None,
    *,
    strict: bool = True,
) -> list[tuple[str, str]]:
    """Pre-8.1 form: a cgroup allow line per major and a bind mount per device node (``strict=False``:
    the majors that are known, to find the lines gpuhost wrote before)."""
    found_majors = set()
    for d in devices:
        try:
            found_majors.add(device_major(d, majors, numbers))
        except OperationFailed:
            if strict:
                raise
    found = sorted(found_majors)
    lines = [("lxc.cgroup2.devices.allow", f"c {m}:* rwm") for m in found]
    lines += [("lxc.mount.entry", f"{d} {d.lstrip('/')} none bind,optional,create=file") for d in devices]
    return lines


#: NVIDIA driver nodes: the entries gpuhost manages (any other device entry belongs to someone else).
_NVIDIA_NODE = re.compile(
    r"^/dev/nvidia(\d+|ctl|-uvm|-uvm-tools|-modeset|-nvswitch\d*|-nvswitchctl|-caps/.+|-caps-imex-channels/.+)$"
)
_DEV_KEY = re.compile(r"^dev(\d+)$")
#: PVE allows dev0..dev255 (pve-container's $MAX_DEVICES).
MAX_DEVICES = 256


def _dev_path(value: str) -> str:
    try:
        return pveconf.parse_property_string(value, "path").get("path", "")
    except ValueError:
        return ""


def _dev_keys(options: Mapping[str, str]) -> list[str]:
    return sorted((k for k in options if _DEV_KEY.match(k)), key=lambda k: int(k[3:]))


def device_targets(ctid: int, conf: pveconf.GuestConfig, devices: list[str], gid: int) -> dict[str, str | None]:
    """The devN entries wanted after the container's next start: ``None`` removes one.

    NVIDIA entries keep their index (or take the lowest free ones); NVIDIA entries for nodes not wanted
    go; entries for any other device are never touched (they are not in the result at all)."""
    after = edit.effective(conf)
    main = conf.main.options
    targets: dict[str, str | None] = {}
    placed: dict[str, str] = {}

    def keep_or_drop(key: str, value: str) -> None:
        path = _dev_path(value)
        if not _NVIDIA_NODE.match(path):
            return
        if path in devices and path not in placed:
            placed[path] = key
            targets[key] = f"{path},gid={gid}"
        else:
            targets[key] = None

    for key in _dev_keys(after):
        keep_or_drop(key, after[key])
    for key in _dev_keys(main):  # an entry queued for deletion: back at its own index, or let it go
        if key not in after:
            keep_or_drop(key, main[key])
    used = set(_dev_keys(after)) | set(_dev_keys(main)) | set(targets)
    free = (f"dev{i}" for i in range(MAX_DEVICES) if f"dev{i}" not in used)
    for path in devices:
        if path in placed:
            continue
        slot = next(free, None)
        if slot is None:
            raise OperationFailed(f"CT {ctid}: no free devN index left for {path} (PVE allows dev0..dev255)")
        placed[path] = slot
        targets[slot] = f"{path},gid={gid}"
    return targets


def _mount_target(value: str) -> tuple[str, str]:
    """``SRC TARGET TYPE OPTIONS`` of an ``lxc.mount.entry`` → (source, target relative to the rootfs)."""
    fields = value.split()
    if len(fields) < 2:
        return value, ""
    return fields[0], fields[1].strip("/")


def _majors_of(
    sources: Iterable[str], majors: dict[str, int], numbers: Mapping[str, tuple[int, int]] | None
) -> set[int]:
    out = set()
    for source in sources:
        if _NVIDIA_NODE.match(source):
            try:
                out.add(device_major(source, majors, numbers))
            except OperationFailed:
                continue
    return out


def _raw_line_number(text: str, key: str, value: str) -> int:
    for number, line in enumerate(text.split("\n"), start=1):
        m = re.match(r"^(lxc\.[a-z0-9_\-.]+)(:|\s*=)\s*(.*?)\s*$", line)
        if m and m.group(1) == key and m.group(3) == value:
            return number
    return 0


def _raw_edit(
    ctid: int,
    conf: pveconf.GuestConfig,
    add: list[tuple[str, str]],
    drop: list[tuple[str, str]],
    devices: list[str],
    facts: HostFacts,
) -> pveconf.GuestConfig:
    """The config with gpuhost's raw lines: ``drop`` (exact lines gpuhost wrote before) removed, ``add``
    added where missing. Bind mounts count by their target: another source on a target gpuhost needs
    is a conflict; ``lxc.prlimit.memlock`` is one value, changed in place."""
    edited = edit.copy(conf)
    path = ct_config_path(ctid)
    kept_mounts = [v for k, v in edited.main.lxc if k == "lxc.mount.entry" and (k, v) not in drop]
    still_needed = {
        f"c {m}:* rwm"
        for m in _majors_of((_mount_target(v)[0] for v in kept_mounts), facts.char_majors, facts.device_numbers)
    }
    for key, value in drop:
        if key == "lxc.cgroup2.devices.allow" and value in still_needed:
            continue  # a bind mount that stays (a user's /dev/nvidia-modeset) needs that major
        edited.remove_lxc(key, value)
    wanted_targets = {d.lstrip("/"): d for d in devices}
    for key, value in edited.main.lxc:
        if key != "lxc.mount.entry":
            continue
        source, target = _mount_target(value)
        if target in wanted_targets and source.rstrip("/") != wanted_targets[target]:
            line = _raw_line_number(conf.text(), key, value)
            raise OperationFailed(
                f"CT {ctid}: {path}:{line}: lxc.mount.entry mounts {source} on {target}, where the container "
                f"gets {wanted_targets[target]}: remove that line, or mount it elsewhere, or leave "
                f"{wanted_targets[target]} out of the container's devices"
            )
    for key, value in add:
        present = edited.lxc_values(key)
        if key == "lxc.mount.entry":
            target = _mount_target(value)[1]
            if any(_mount_target(v)[1] == target for v in present):
                continue  # the same source on the same target is there already, in its own words
        elif key == "lxc.prlimit.memlock" and present:
            edited.replace_lxc(key, value)
            continue
        if value not in present:
            edited.add_lxc(key, value)
    return edited


class LxcDevices(Operation[DevicesArgs]):
    """GPU device nodes passed into the container (``devN``, PVE ≥ 8.1; raw ``lxc.*`` before),
    and ``lxc.prlimit.memlock: unlimited`` for pinned memory. Notifies a restart when running.

    Entries for other devices (an iGPU's ``/dev/dri/card0``, a user's bind mounts) are kept. Pending
    values count: a pending deletion of a GPU entry is repaired; a staged entry equal to the wanted one
    waits for the container's restart (ok, and the restart is recorded)."""

    kind = "lxc_devices"
    Args = DevicesArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        conf = host.fact(ct_config, a.ctid)
        if conf is None:
            if host.check:
                raise SkipTask(f"CT {a.ctid} does not exist yet (it would be created first)")
            raise OperationFailed(f"CT {a.ctid} does not exist")
        version = host.fact(pve_version)
        facts = host.fact(host_facts)
        present = set(facts.nvidia_devices)
        missing = [d for d in a.devices if d not in present]
        if missing and not host.check:
            raise OperationFailed(
                f"{', '.join(missing)} missing on {host.name}: the container would refuse to start "
                f"(PVE: 'Device {missing[0]} does not exist'). Load nvidia_uvm and create the nodes at boot "
                "(gpuhost provision host installs nvidia-devnodes.service), or run: nvidia-modprobe -c0 -u"
            )
        reasons: list[str] = []
        change = edit.Drift()
        legacy = legacy_lines(a.devices, facts.char_majors, facts.device_numbers, strict=False)
        if version.at_least(8, 1):
            change = edit.drift(conf, device_targets(a.ctid, conf, a.devices, a.gid))
            add: list[tuple[str, str]] = []
            drop = legacy  # what gpuhost wrote for these nodes before devN existed
        else:
            add, drop = legacy_lines(a.devices, facts.char_majors, facts.device_numbers), []
        if a.memlock_unlimited:
            add.append(("lxc.prlimit.memlock", "unlimited"))
        before = conf.text()
        edited = _raw_edit(a.ctid, conf, add, drop, a.devices, facts)
        actions: list[Any] = []
        after = edited.text() if edited.modified else before
        if after != before:
            actions.append(
                EditGuestConfig(
                    Guest.ct(a.ctid),
                    ct_config_path(a.ctid),
                    edit.lock_path("lxc", a.ctid),
                    conf.digest,
                    after,
                    backup_dir=BACKUP_DIR,
                )
            )
            reasons.append("raw lxc keys")
        final = edited
        if change.changes:
            # devN is root@pam-only in PVE: the API client takes the root route for it. The file edit (if
            # any) comes first, and the first call carries the digest of the file that edit leaves; a
            # second call (delete after revert, see Drift.calls) follows under PVE's lock.
            running = host.fact(ct_status, a.ctid) == "running"
            final = pveconf.parse(after, "lxc")
            for n, params in enumerate(change.calls()):
                actions.append(
                    PveCall(
                        "put",
                        f"nodes/{host.fact(node_name)}/lxc/{a.ctid}/config",
                        params,
                        digest=pveconf.digest_of(after) if n == 0 else None,
                    )
                )
                final = edit.apply_params(final, params, running=running)
            reasons.insert(0, f"devN entries for {len(a.devices)} devices")
        foreign = [
            f"{k}={_dev_path(v)}"
            for k, v in edit.effective(conf).items()
            if _DEV_KEY.match(k) and not _NVIDIA_NODE.match(_dev_path(v))
        ]
        kept = f"; kept {', '.join(sorted(foreign))}" if foreign else ""
        if not actions:
            status = host.fact(ct_status, a.ctid) if change.waiting else None
            return _settled(a.ctid, status, change.waiting, f"CT {a.ctid} has the {len(a.devices)} GPU devices{kept}")
        return Plan(
            reason=f"CT {a.ctid}: " + ", ".join(reasons) + kept,
            actions=actions,
            diff=_config_diff(a.ctid, before, final),
        )


class RunningArgs(Args):
    ctid: int = Field(description="the container's id")


class LxcRunning(Operation[RunningArgs]):
    """The container is running (started when stopped)."""

    kind = "lxc_running"
    Args = RunningArgs

    def plan(self, host: HostContext) -> Plan:
        status = host.fact(ct_status, self.args.ctid)
        if status == "running":
            return nothing(f"CT {self.args.ctid} running")
        if status is None and not host.check:
            raise OperationFailed(f"CT {self.args.ctid} does not exist")
        start = PveCall("post", f"nodes/{host.fact(node_name)}/lxc/{self.args.ctid}/status/start")
        return Plan(reason=f"start CT {self.args.ctid} ({status or 'after creating it'})", actions=[start])


class LxcRestart(Operation[RunningArgs]):
    """Handler: restart a running container so configuration changes apply. The runner carries the
    restart out only with the operator's consent (``--allow-restart``); otherwise it records the need."""

    kind = "lxc_restart"
    Args = RunningArgs

    def plan(self, host: HostContext) -> Plan:
        ctid = self.args.ctid
        status = host.fact(ct_status, ctid)
        if status != "running":
            return nothing(f"CT {ctid} is {status or 'absent'}: changes apply at its next start")
        call = PveCall("post", f"nodes/{host.fact(node_name)}/lxc/{ctid}/status/reboot")
        return Plan(reason=f"restart CT {ctid}", actions=[RestartGuest(Guest.ct(ctid), call)])


class InContainerArgs(InGuestArgs):
    """In a playbook: ``{ctid: 200, operation: copy, params: {...}}``; roles pass the operation object."""

    ctid: int = Field(description="the container the operation runs in (through pct exec)")


class InCt(InGuestOperation[InContainerArgs]):
    """Any operation, planned and applied inside container ``ctid``."""

    kind = "in_container"
    Args = InContainerArgs
    inside = "cannot run inside a container"

    def guest(self) -> Guest:
        return Guest.ct(self.args.ctid)

    def status(self, host: HostContext) -> str | None:
        return host.fact(ct_status, self.args.ctid)


class PushArgs(Args):
    ctid: int = Field(description="the container's id")
    src: str = Field(description="absolute path of the file on the node")
    dest: str = Field(description="absolute path of the copy inside the container")
    sha256: str = Field(description="the file's SHA-256: the copy in the container is replaced unless it has it")
    mode: str | None = Field(default="0644", description="octal mode of the copy inside the container")

    @field_validator("src", "dest")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("must be an absolute path")
        return v

    @field_validator("sha256")
    @classmethod
    def _sha256(cls, v: str) -> str:
        if not re.fullmatch(r"[0-9a-fA-F]{64}", v):
            raise ValueError("must be a SHA-256 (64 hex digits)")
        return v.lower()

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"0?[0-7]{3,4}", v):
            raise ValueError(f"'{v}' is not an octal mode such as \"0644\"")
        return v


class PushToGuest(Operation[PushArgs]):
    """A file of the node copied into a container, guarded by its checksum: planned from the SHA-256 of
    the copy inside the container (a copy cut short by an interrupted push differs, and is replaced),
    applied from node to container (``pct push`` to a temporary name, checked inside, renamed)."""

    kind = "push_to_guest"
    Args = PushArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        status = host.fact(ct_status, a.ctid)
        where = f"CT {a.ctid}:{a.dest}"
        if status != "running":
            if host.check:
                raise SkipTask(f"CT {a.ctid} is {status or 'not created yet'}: would push {a.src} to {where}")
            raise OperationFailed(f"CT {a.ctid} is {status or 'absent'}: cannot push {a.src} into it")
        ct = Guest.ct(a.ctid)
        current = host.guest(ct).fact(file_facts.checksum, a.dest)
        mode = int(a.mode, 8) if a.mode is not None else None
        action = CopyToGuest(ct, a.src, a.dest, a.sha256, mode)
        if current is None:
            return Plan(reason=f"push {a.src} to {where} (now: none)", actions=[action])
        digest, have = current
        if digest != a.sha256:
            return Plan(
                reason=f"push {a.src} to {where} (now: sha256 {digest[:12]}…, want {a.sha256[:12]}…)",
                actions=[action],
            )
        if mode is not None and have != mode:
            return Plan(reason=f"mode of {where} {have:o} → {mode:o}", actions=[action])
        return nothing(f"{where} has sha256 {a.sha256[:12]}…")
