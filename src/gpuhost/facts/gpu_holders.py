"""Which running guest holds which GPU of a node, and what binds GPUs to vfio-pci at boot (issue 31).

One round trip reads ``qm list`` and ``pct list`` (only running guests hold a device), every guest's
configuration and the NVIDIA driver's ``Device Minor`` of each GPU it drives (the ``options vfio-pci ids=`` lines
of ``/etc/modprobe.d`` are host facts, :attr:`gpuhost.facts.host.HostFacts.vfio_ids`):

- a running VM holds the host devices of its ``hostpciN`` entries (``host=`` ids, ``;``-separated; a
  ``mapping=`` entry names no device here). qemu-server reserves them at start and refuses a second VM on one
  (``reserve_pci_usage`` in PVE/QemuServer/PCI.pm: "PCI device '…' already in use by VMID '…'").
- a running CT holds the GPU behind each ``/dev/nvidiaN`` it is given (``devN`` entries, PVE 8.1+, or bind
  ``lxc.mount.entry`` lines): N is the GPU's minor, which ``/proc/driver/nvidia/gpus/<bdf>/information`` gives
  ("Device Minor:"); with no NVIDIA module loaded the minor cannot be resolved and the device node is named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.facts.batch import parse_sections, sections_command
from gpuhost.facts.hardware import full_bdf
from gpuhost.pve import config as pveconf
from gpuhost.pve.guest_lists import pct_rows, qm_rows

_CONF = "@@gpuhost-conf@@"


def _cat_each(glob: str) -> str:
    return f'for f in {glob}; do [ -f "$f" ] && echo "{_CONF} $f" && cat "$f"; done; true'


PROBES = {
    "qm": "qm list",
    "pct": "pct list",
    "vm_conf": _cat_each("/etc/pve/qemu-server/*.conf"),
    "ct_conf": _cat_each("/etc/pve/lxc/*.conf"),
    "minors": "grep -H '^Device Minor' /proc/driver/nvidia/gpus/*/information",
}


@dataclass(frozen=True)
class Holder:
    kind: str  # "VM" or "CT"
    id: int
    name: str
    devices: tuple[str, ...]  # PCI addresses (0000:41:00.0), or a /dev/nvidiaN whose GPU is not known

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.name})" if self.name else f"{self.kind} {self.id}"


@dataclass(frozen=True)
class GpuHolders:
    holders: tuple[Holder, ...]
    minors: dict[int, str]  # Device Minor -> PCI address, for the GPUs the NVIDIA module drives

    def holding(self, bdf: str, *, kind: str | None = None, besides: int | None = None) -> list[Holder]:
        """The running guests that hold the GPU at ``bdf`` (its slot: every function), of ``kind``, not ``besides``."""
        slot = _slot(bdf)
        return [
            h
            for h in self.holders
            if (kind is None or h.kind == kind) and h.id != besides and any(_slot(d) == slot for d in h.devices)
        ]


def _slot(pci_id: str) -> str:
    if pci_id.startswith("/dev/"):
        return pci_id
    return full_bdf(pci_id.lower()).rsplit(".", 1)[0]


def _configs(text: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for chunk in text.split(_CONF + " ")[1:]:
        path, _, body = chunk.partition("\n")
        m = re.search(r"/(\d+)\.conf$", path.strip())
        if m:
            out[int(m.group(1))] = body
    return out


def _minors(text: str) -> dict[int, str]:
    """``/proc/driver/nvidia/gpus/0000:41:00.0/information:Device Minor: \t 0`` lines."""
    out: dict[int, str] = {}
    for line in text.splitlines():
        m = re.match(r"^/proc/driver/nvidia/gpus/([0-9a-fA-F:.]+)/information:Device Minor:\s*(\d+)", line)
        if m:
            out[int(m.group(2))] = full_bdf(m.group(1).lower())
    return out


def _vm_devices(conf: pveconf.GuestConfig) -> tuple[str, ...]:
    out: list[str] = []
    for key, value in conf.main.options.items():
        if not re.fullmatch(r"hostpci\d+", key):
            continue
        try:
            props = pveconf.parse_property_string(value, "host")
        except ValueError:
            continue  # PVE would not have started the VM with it
        out += [full_bdf(i.lower()) for i in props.get("host", "").split(";") if i]
    return tuple(out)


def _ct_devices(conf: pveconf.GuestConfig, minors: dict[int, str]) -> tuple[str, ...]:
    nodes = [v.split(",", 1)[0] for k, v in conf.main.options.items() if re.fullmatch(r"dev\d+", k)]
    nodes += [v.split()[0] for k, v in conf.main.lxc if k == "lxc.mount.entry" and v.split()]
    out: list[str] = []
    for node in nodes:
        m = re.fullmatch(r"/dev/nvidia(\d+)", node)
        if m:
            out.append(minors.get(int(m.group(1)), node))
    return tuple(dict.fromkeys(out))


def _parse(result: CommandResult) -> GpuHolders:
    s = parse_sections(result.stdout)

    def out(key: str) -> str:
        return s[key].output if key in s else ""

    minors = _minors(out("minors"))
    holders: list[Holder] = []
    vm_confs, ct_confs = _configs(out("vm_conf")), _configs(out("ct_conf"))
    for row in qm_rows(out("qm")):
        if row.status == "running" and row.vmid in vm_confs:
            devices = _vm_devices(pveconf.parse(vm_confs[row.vmid], "qemu"))
            if devices:
                holders.append(Holder("VM", row.vmid, row.name, devices))
    for ct in pct_rows(out("pct")):
        if ct.status == "running" and ct.vmid in ct_confs:
            devices = _ct_devices(pveconf.parse(ct_confs[ct.vmid], "lxc"), minors)
            if devices:
                holders.append(Holder("CT", ct.vmid, ct.name, devices))
    return GpuHolders(tuple(holders), minors)


gpu_holders: Fact[GpuHolders] = Fact("GPU holders", lambda: sections_command(PROBES), _parse)
"""The running guests holding GPUs, the NVIDIA minors, and the vfio-pci ids bound at boot."""
