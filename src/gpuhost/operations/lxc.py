"""LXC guests on a Proxmox VE node: created, GPUs passed through, running, restarted only when allowed.

Changes go through PVE's API (:mod:`gpuhost.pve.api`): ordinary keys with the inventory's API
token when there is one, ``devN`` as root (PVE lets only ``root@pam`` set device passthrough).
Raw ``lxc.*`` keys have no API at all: they are written into the file, atomically.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field

from gpuhost.core.actions import InGuest, PveCall, RestartGuest, RunCommand, WriteFile
from gpuhost.core.guest import Guest
from gpuhost.core.operation import Args, Operation, OperationLookup, SkipTask
from gpuhost.core.plan import Plan, nothing, unified_diff
from gpuhost.errors import OperationFailed
from gpuhost.facts.host import host_facts
from gpuhost.facts.pve import ct_config, ct_config_path, ct_status, node_name, pve_version, vztemplates
from gpuhost.pve import config as pveconf

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

BACKUP_DIR = "/var/backups/gpuhost"


class ContainerArgs(Args):
    ctid: int = Field(description="the container's id (100..999999999)")
    hostname: str = Field(description="DNS name of the container")
    template: str = Field(
        default="auto", description="OS template volid, or auto: the newest Debian 12 template on storage"
    )
    storage: str = Field(default="local", description="storage holding container templates")
    cores: int = Field(default=8, description="CPU cores")
    memory: int = Field(default=65536, description="memory in MiB")
    swap: int = Field(default=0, description="swap in MiB")
    rootfs: str = Field(
        default="local-lvm:64", description="STORAGE:SIZE_GiB or an existing volume, PVE's rootfs syntax"
    )
    net0: str | None = Field(default=None, description="PVE net0 property string, e.g. name=eth0,bridge=vmbr0,ip=dhcp")
    unprivileged: bool = Field(default=False, description="an unprivileged container (user namespaces)")
    features: str | None = Field(default=None, description="PVE features string, e.g. nesting=1")
    onboot: bool = Field(default=True, description="start the container when the node boots")


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
        changes = {k: v for k, v in self.wanted().items() if conf.get(k) != v}
        if conf.get("unprivileged", "0") != ("1" if a.unprivileged else "0"):
            raise OperationFailed(
                f"CT {a.ctid} is {'un' if conf.get('unprivileged') == '1' else ''}privileged; "
                "PVE cannot change that in place (back up, restore with --unprivileged)"
            )
        if not changes:
            return nothing(f"CT {a.ctid} exists ({status})")
        node = host.fact(node_name)
        return Plan(
            reason=f"CT {a.ctid}: set {', '.join(changes)}",
            actions=[PveCall("put", f"nodes/{node}/lxc/{a.ctid}/config", tuple(changes.items()))],
        )


class DevicesArgs(Args):
    ctid: int = Field(description="the container's id")
    devices: list[str] = Field(
        description="host device paths passed through as devN entries, e.g. /dev/nvidia0, /dev/nvidiactl"
    )
    gid: int = Field(default=44, description="group owning the devices inside the container (44: video in Debian)")
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
) -> list[tuple[str, str]]:
    """Pre-8.1 form: a cgroup allow line per major and a bind mount per device node."""
    found = sorted({device_major(d, majors, numbers) for d in devices})
    lines = [("lxc.cgroup2.devices.allow", f"c {m}:* rwm") for m in found]
    lines += [("lxc.mount.entry", f"{d} {d.lstrip('/')} none bind,optional,create=file") for d in devices]
    return lines


class LxcDevices(Operation[DevicesArgs]):
    """GPU device nodes passed into the container (``devN``, PVE ≥ 8.1; raw ``lxc.*`` before),
    and ``lxc.prlimit.memlock: unlimited`` for pinned memory. Notifies a restart when running."""

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
        actions: list[Any] = []
        reasons: list[str] = []
        if version.at_least(8, 1):
            wanted = dev_entries(a.devices, a.gid)
            have = {k: v for k, v in conf.main.options.items() if k.startswith("dev") and k[3:].isdigit()}
            set_args = {k: v for k, v in wanted.items() if have.get(k) != v}
            extra = sorted(set(have) - set(wanted), key=lambda k: int(k[3:]))
            if set_args or extra:
                params = dict(set_args)
                if extra:
                    params["delete"] = ",".join(extra)
                # devN is root@pam-only in PVE: the API client takes the root route for it
                actions.append(
                    PveCall("put", f"nodes/{host.fact(node_name)}/lxc/{a.ctid}/config", tuple(params.items()))
                )
                reasons.append(f"devN entries for {len(a.devices)} devices")
            raw: list[tuple[str, str]] = []
        else:
            raw = legacy_lines(a.devices, facts.char_majors, facts.device_numbers)
        if a.memlock_unlimited:
            raw.append(("lxc.prlimit.memlock", "unlimited"))
        diff = ""
        before = conf.text()
        edited = pveconf.parse(before, "lxc")  # a copy: the cached fact stays what the host has
        for key, value in raw:
            if value not in edited.lxc_values(key):
                edited.add_lxc(key, value)
        after = edited.render()
        if after != before:
            path = ct_config_path(a.ctid)
            # The file first: `pct set` then edits the file that already has the raw keys
            # (written the other way round, this stale text would drop the new devN lines).
            actions.insert(0, WriteFile(path, after, backup_dir=BACKUP_DIR))
            reasons.append("raw lxc keys")
            diff = unified_diff(path, before, after)
        if not actions:
            return nothing(f"CT {a.ctid} has the {len(a.devices)} GPU devices")
        return Plan(reason=f"CT {a.ctid}: " + ", ".join(reasons), actions=actions, diff=diff)


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


class InContainerArgs(Args):
    """In a playbook: ``{ctid: 200, operation: copy, params: {...}}``; roles pass the operation object."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    ctid: int = Field(description="the container the operation runs in (through pct exec)")
    operation: Operation[Any] = Field(
        description="the operation to run inside: in a playbook its kind, with its arguments in params"
    )


class InCt(Operation[InContainerArgs]):
    """Any operation, planned and applied inside container ``ctid``."""

    kind = "in_container"
    Args = InContainerArgs

    @classmethod
    def from_dict(cls, raw: dict[str, Any], lookup: OperationLookup | None = None) -> Operation[Any]:
        if lookup is None or not isinstance(raw, dict):
            return cls(InContainerArgs.model_validate(raw))
        raw = dict(raw)
        kind, params = raw.pop("operation", None), raw.pop("params", {})
        inner_cls = lookup(kind) if isinstance(kind, str) else None
        if inner_cls is None:
            raise ValueError(f"in_container: unknown operation {kind!r}")
        inner = inner_cls.from_dict(params or {}, lookup)
        return cls(InContainerArgs.model_validate({**raw, "operation": inner}))

    def describe(self) -> str:
        return f"in_container({self.args.operation.kind})"

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        inner = a.operation
        status = host.fact(ct_status, a.ctid)
        if status != "running":
            if host.check:
                raise SkipTask(f"CT {a.ctid} is {status or 'not created yet'}: would {inner.describe()} inside")
            raise OperationFailed(f"CT {a.ctid} is {status or 'absent'}: cannot {inner.kind} inside it")
        ct = Guest.ct(a.ctid)
        plan = inner.plan(host.guest(ct))
        inside = []
        for act in plan.actions:
            if not isinstance(act, (WriteFile, RunCommand)):
                raise OperationFailed(
                    f"in_container: {inner.kind} asks for {act.describe()}, which cannot run inside a container"
                )
            inside.append(InGuest(ct, act))
        return Plan(reason=f"CT {a.ctid}: {plan.reason}", actions=list(inside), diff=plan.diff)
