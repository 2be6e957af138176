"""The GPU part of a KVM guest's configuration: what gpuhost owns, what it wants, and the lints.

gpuhost owns these keys of ``/etc/pve/qemu-server/<vmid>.conf`` and nothing else:

* ``machine``: q35 (a pinned ``pc-q35-X.Y`` is kept; an i440fx type becomes ``q35``, other
  properties such as ``viommu`` are kept);
* ``bios`` and ``efidisk0`` only when asked for OVMF;
* ``cpu``: its model becomes ``host``, its flags and other properties stay;
* the ``hostpciN`` entries of the GPUs it passes through (``<bus>:<dev>.0,pcie=1``, the entry's
  other properties kept); entries for other devices keep their index and value;
* the ``-set device.hostpciN.x-nv-gpudirect-clique=K`` words of ``args`` (other words stay).

:func:`lint` checks a whole configuration as PVE and QEMU would see it and names each trap
(qemu-server ``PCI.pm``/``CPUConfig.pm``, QEMU's ``vfio-pci`` ``x-nv-gpudirect-clique`` property).
Pure: no host is touched here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuhost.pve.config import GuestConfig, iter_property_string

MAX_HOSTPCI = 16  # qemu-server PCI.pm $MAX_HOSTPCI_DEVICES
CLIQUE_MAX = 15  # NVIDIA's 4-bit clique id
_HOSTPCI_KEY = re.compile(r"^hostpci(\d+)$")
_CLIQUE = re.compile(r"-set\s+device\.(?P<dev>[A-Za-z0-9_.\-]+)\.x-nv-gpudirect-clique=(?P<val>\S*)")
_PCI_ID = re.compile(r"^(?:(?P<dom>[0-9a-f]{4,}):)?(?P<bus>[0-9a-f]{2}):(?P<dev>[0-9a-f]{2})(?:\.(?P<fn>[0-9a-f]))?$")


@dataclass(frozen=True)
class GpuRef:
    """A GPU to pass through: a host PCI address (``0000:41:00.0``, function optional) or a PVE
    resource mapping id; ``clique`` is its GPUDirect clique (None: none)."""

    pci: str | None = None
    mapping: str | None = None
    clique: int | None = None

    def key(self) -> str:
        return f"mapping={self.mapping}" if self.mapping else slot(self.pci or "")


@dataclass(frozen=True)
class VmWant:
    gpus: tuple[GpuRef, ...]
    bios: str = "keep"  # keep | ovmf
    efidisk: str | None = None  # efidisk0 value to add when OVMF has none
    cpu_host: bool = True
    options: Mapping[str, str] = field(default_factory=dict)  # plain keys (memory, cores, numa, …)


def slot(pci_id: str) -> str:
    """``0000:41:00.0``, ``41:00``, ``41:00.1`` → ``0000:41:00`` (what identifies the card)."""
    m = _PCI_ID.match(pci_id.lower())
    if not m:
        return pci_id.lower()
    return f"{m.group('dom') or '0000'}:{m.group('bus')}:{m.group('dev')}"


def _with_function(pci_id: str) -> str:
    m = _PCI_ID.match(pci_id.lower())
    if m and m.group("fn") is None:
        return f"{pci_id}.0"
    return pci_id


def _props(value: str, default_key: str) -> list[tuple[str, str]]:
    """A property string as ordered (key, value) pairs, the bare item under ``default_key``."""
    return [(k if k is not None else default_key, v) for k, v in iter_property_string(value)]


def _render(pairs: list[tuple[str, str]], default_key: str) -> str:
    return ",".join(v if k == default_key and i == 0 else f"{k}={v}" for i, (k, v) in enumerate(pairs))


def _set_prop(pairs: list[tuple[str, str]], key: str, value: str) -> list[tuple[str, str]]:
    if any(k == key for k, _ in pairs):
        return [(k, value if k == key else v) for k, v in pairs]
    return [*pairs, (key, value)]


def hostpci_ids(value: str) -> list[str]:
    host = dict(_props(value, "host")).get("host", "")
    return [i for i in host.split(";") if i]


def hostpci_entries(options: Mapping[str, str]) -> dict[int, str]:
    return {int(m.group(1)): v for k, v in options.items() if (m := _HOSTPCI_KEY.match(k))}


def machine_info(value: str | None) -> tuple[str, bool]:
    """(machine type, is q35); PVE's default (no key) is i440fx ``pc``."""
    mtype = dict(_props(value, "type")).get("type", "pc") if value else "pc"
    return mtype, "q35" in mtype


def cliques_in_args(args: str | None) -> dict[str, str]:
    """``-set device.<id>.x-nv-gpudirect-clique=<K>`` words of ``args``: {device id: K as written}."""
    return {m.group("dev"): m.group("val") for m in _CLIQUE.finditer(args or "")}


def strip_cliques(args: str | None) -> str:
    rest = _CLIQUE.sub(" ", args or "")
    return " ".join(rest.split())


def _gpu_value(old: str | None, gpu: GpuRef) -> str:
    if gpu.mapping:
        pairs = [(k, v) for k, v in _props(old, "host") if k not in ("host", "mapping")] if old else []
        return _render(_set_prop([("mapping", gpu.mapping), *pairs], "pcie", "1"), "host")
    assert gpu.pci is not None
    if old is None:
        return f"{_with_function(gpu.pci)},pcie=1"
    pairs = _props(old, "host")
    pairs = [(k, _with_function(v) if k == "host" else v) for k, v in pairs]
    return _render(_set_prop(pairs, "pcie", "1"), "host")


def _index_of(entries: dict[int, str], gpu: GpuRef) -> int | None:
    for index, value in sorted(entries.items()):
        if gpu.mapping:
            if dict(_props(value, "host")).get("mapping") == gpu.mapping:
                return index
        elif any(slot(i) == slot(gpu.pci or "") for i in hostpci_ids(value)):
            return index
    return None


@dataclass
class Wanted:
    """The owned keys' wanted values (None: delete) and what the operator should know."""

    values: dict[str, str | None]
    notes: list[str]


def wanted(current: Mapping[str, str], want: VmWant) -> Wanted:
    """The owned keys' values that make ``current`` (the effective config) a GPU VM as ``want`` says."""
    values: dict[str, str | None] = {}
    notes: list[str] = []
    mtype, q35 = machine_info(current.get("machine"))
    if not q35:
        pairs = [(k, v) for k, v in _props(current["machine"], "type") if k != "type"] if current.get("machine") else []
        values["machine"] = _render([("type", "q35"), *pairs], "type")
        if any(re.fullmatch(r"net\d+", k) for k in current):
            notes.append(
                f"machine {mtype} -> q35 renames the guest's network interface (the NIC moves behind PVE's pci.0 "
                "bridge: under predictable naming e.g. ens18 becomes enpXs18): before the restart, "
                "match the interface by MAC in the guest, "
                "e.g. netplan 'match: {macaddress: <net0 MAC>}' with 'set-name: eth0', or a systemd .link file "
                "with [Match] MACAddress= and [Link] Name="
            )
        if mtype.startswith("pc-i440fx"):
            notes.append(f"the machine version pin {mtype} is i440fx-only: q35 takes PVE's latest version")
    if want.bios == "ovmf":
        if current.get("bios") != "ovmf":
            values["bios"] = "ovmf"
            notes.append("bios seabios -> ovmf: a guest installed for BIOS boot needs an EFI boot entry")
        if "efidisk0" not in current and want.efidisk:
            values["efidisk0"] = want.efidisk
    if want.cpu_host:
        pairs = _props(current.get("cpu") or "kvm64", "cputype")
        pairs = [(k, v) for k, v in pairs if k != "cputype"]
        values["cpu"] = _render([("cputype", "host"), *pairs], "cputype")
    for key, value in want.options.items():
        values[key] = value
    entries = hostpci_entries(current)
    placed: dict[int, GpuRef] = {}
    pending_new: list[GpuRef] = []
    for gpu in want.gpus:
        index = _index_of(entries, gpu)
        if index is None or index in placed:
            pending_new.append(gpu)
        else:
            placed[index] = gpu
    free = (i for i in range(MAX_HOSTPCI * 4) if i not in entries)
    for gpu in pending_new:
        placed[next(free)] = gpu
    for index, gpu in sorted(placed.items()):
        values[f"hostpci{index}"] = _gpu_value(entries.get(index), gpu)
    clique_words = [
        f"-set device.hostpci{index}.x-nv-gpudirect-clique={gpu.clique}"
        for index, gpu in sorted(placed.items())
        if gpu.clique is not None
    ]
    rest = strip_cliques(current.get("args"))
    args = " ".join(filter(None, [rest, *clique_words]))
    if args != (current.get("args") or ""):
        if " ".join((current.get("args") or "").split()) != args:
            values["args"] = args or None
    return Wanted({k: v for k, v in values.items() if current.get(k) != v}, notes)


def merged(current: Mapping[str, str], values: Mapping[str, str | None]) -> dict[str, str]:
    out = dict(current)
    for key, value in values.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def lint(options: Mapping[str, str]) -> list[str]:
    """What PVE or QEMU would refuse, or silently get wrong, in this configuration (one line each)."""
    problems: list[str] = []
    _, q35 = machine_info(options.get("machine"))
    entries = hostpci_entries(options)
    over = sorted(i for i in entries if i >= MAX_HOSTPCI)
    if len(entries) > MAX_HOSTPCI or over:
        problems.append(
            f"hostpci: {len(entries)} entries (up to hostpci{max(entries)}), but PVE allows at most {MAX_HOSTPCI} "
            "(hostpci0..hostpci15, qemu-server $MAX_HOSTPCI_DEVICES)"
        )
    for index, value in sorted(entries.items()):
        props = dict(_props(value, "host"))
        if props.get("pcie") == "1" and not q35:
            problems.append(
                f"hostpci{index}: pcie=1 needs the q35 machine type (machine: {options.get('machine', 'pc')}); "
                "PVE: 'PCIe passthrough is only available on q35 machines'"
            )
    cliques = cliques_in_args(options.get("args"))
    for dev, val in cliques.items():
        if not val.isdigit() or not 0 <= int(val) <= CLIQUE_MAX:
            problems.append(
                f"args: x-nv-gpudirect-clique={val} for {dev} is outside 0-15 (NVIDIA's clique id has 4 bits; "
                "QEMU refuses the VM start)"
            )
        base = dev.split(".", 1)[0]
        m = _HOSTPCI_KEY.match(base)
        if m is None or int(m.group(1)) not in entries:
            problems.append(f"args: a clique for device {dev}, but the VM has no {base}")
            continue
        value = entries[int(m.group(1))]
        ids = hostpci_ids(value)
        if "." in dev or len(ids) > 1 or any(_PCI_ID.match(i.lower()) and "." not in i.rsplit(":", 1)[-1] for i in ids):
            problems.append(
                f"{base}: '{value}' names no single function (no '.0'): PVE passes every function as "
                f"{base}.0, {base}.1, … and '-set device.{base}.x-nv-gpudirect-clique' then matches no device; "
                "QEMU's -set cannot target the dotted ids. Write the address with '.0'"
            )
    if cliques:
        for index, value in sorted(entries.items()):
            if dict(_props(value, "host")).get("x-vga") == "1":
                problems.append(
                    f"hostpci{index}: x-vga=1 makes PVE add kvm=off, which hides the hypervisor; the NVIDIA driver "
                    "then ignores the GPUDirect clique (P2P stays 'chipset not supported'). Remove x-vga=1"
                )
        if dict(_props(options.get("cpu") or "kvm64", "cputype")).get("hidden") == "1":
            problems.append(
                "cpu: hidden=1 adds kvm=off, which hides the hypervisor; the NVIDIA driver then ignores the "
                "GPUDirect clique (P2P stays 'chipset not supported'). Remove hidden=1"
            )
    problems.extend(_duplicate_devices(entries))
    if options.get("bios") == "ovmf" and "efidisk0" not in options:
        problems.append(
            "bios: ovmf without an efidisk0 (PVE: 'there needs to be an EFI Disk'): set the VM's efidisk_storage "
            "in the inventory, or add efidisk0"
        )
    return problems


def _function(pci_id: str) -> str | None:
    m = _PCI_ID.match(pci_id.lower())
    return m.group("fn") if m else None


def _duplicate_devices(entries: Mapping[int, str]) -> list[str]:
    """One host device in two hostpciN entries: QEMU refuses the second ('vfio … device is already attached').

    An id without a function (``41:00``) passes every function of the slot, so it collides with any function of
    that slot named elsewhere; two different functions (``d0:15.1`` and ``d0:15.2``) do not collide."""
    seen: list[tuple[int, str, str | None, str]] = []  # (index, slot, function or None, as written)
    out: list[str] = []
    for index, value in sorted(entries.items()):
        for pci_id in hostpci_ids(value):
            if not _PCI_ID.match(pci_id.lower()):
                continue  # a mapping id or something PVE resolves
            sl, fn = slot(pci_id), _function(pci_id)
            for other, other_slot, other_fn, written in seen:
                if other != index and other_slot == sl and (fn is None or other_fn is None or fn == other_fn):
                    out.append(
                        f"hostpci{other} ('{written}') and hostpci{index} ('{pci_id}') pass the same host device "
                        f"{sl}{'.' + (fn or other_fn or '') if (fn or other_fn) else ''}: QEMU refuses the second "
                        "('vfio … device is already attached'); keep one entry per device"
                    )
            seen.append((index, sl, fn, pci_id))
    return out


def effective(conf: GuestConfig) -> dict[str, str]:
    """The configuration with its pending changes applied (what ``GET …/config`` returns)."""
    out = dict(conf.main.options)
    pending = conf.pending
    if pending is not None:
        out.update({k: v for k, v in pending.options.items() if k != "delete"})
    for key in conf.pending_deletes():
        out.pop(key, None)
    return out


def pending_keys(conf: GuestConfig) -> list[str]:
    pending = conf.pending
    keys = [k for k in (pending.options if pending else {}) if k != "delete"]
    return sorted(keys + list(conf.pending_deletes()))


# ---- qm showcmd ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KvmCmdline:
    vfio: dict[str, tuple[str, str]]  # device id -> (host, bus)
    cliques: dict[str, str]
    machine: str
    kvm_off: bool


def parse_showcmd(text: str) -> KvmCmdline:
    """``qm showcmd <vmid> [--pretty]`` → the facts that prove passthrough and cliques."""
    argv = shlex.split(text.replace("\\\n", " "))
    vfio: dict[str, tuple[str, str]] = {}
    cliques: dict[str, str] = {}
    machine, kvm_off = "", False
    for i, word in enumerate(argv[:-1]):
        nxt = argv[i + 1]
        if word == "-device" and nxt.startswith("vfio-pci,"):
            props = dict(kv.split("=", 1) for kv in nxt.split(",")[1:] if "=" in kv)
            vfio[props.get("id", "")] = (props.get("host", ""), props.get("bus", ""))
        elif word == "-set":
            m = re.fullmatch(r"device\.(.+)\.x-nv-gpudirect-clique=(\S*)", nxt)
            if m:
                cliques[m.group(1)] = m.group(2)
        elif word == "-machine":
            machine = dict(kv.split("=", 1) for kv in nxt.split(",") if "=" in kv).get("type", "")
        elif word == "-cpu" and "kvm=off" in nxt.split(","):
            kvm_off = True
    return KvmCmdline(vfio, cliques, machine, kvm_off)


def p2p_blockers(options: Mapping[str, str]) -> list[str]:
    """What in this (running) configuration keeps the NVIDIA driver in the guest from allowing P2P."""
    out: list[str] = []
    mtype, q35 = machine_info(options.get("machine"))
    if not q35:
        out.append(f"machine is {mtype} (i440fx): no PCIe root ports, set machine: q35")
    entries = hostpci_entries(options)
    cliques = cliques_in_args(options.get("args"))
    for index, value in sorted(entries.items()):
        props = dict(_props(value, "host"))
        if props.get("pcie") != "1":
            out.append(f"hostpci{index} has no pcie=1")
        if f"hostpci{index}" not in cliques:
            out.append(
                f"hostpci{index} has no GPUDirect clique (args: -set device.hostpci{index}.x-nv-gpudirect-clique=K)"
            )
        elif any("." not in i.rsplit(":", 1)[-1] for i in hostpci_ids(value)):
            out.append(f"hostpci{index} '{value}' names no function .0, so its clique matches no device")
        if props.get("x-vga") == "1":
            out.append(f"hostpci{index} has x-vga=1, which adds kvm=off")
    if dict(_props(options.get("cpu") or "kvm64", "cputype")).get("hidden") == "1":
        out.append("cpu has hidden=1, which adds kvm=off")
    return out


def gpu_indices(options: Mapping[str, str], gpus: tuple[GpuRef, ...]) -> dict[int, GpuRef]:
    """Which hostpciN holds each GPU in this configuration (GPUs not found are left out)."""
    entries = hostpci_entries(options)
    out: dict[int, GpuRef] = {}
    for gpu in gpus:
        index = _index_of(entries, gpu)
        if index is not None:
            out[index] = gpu
    return out
