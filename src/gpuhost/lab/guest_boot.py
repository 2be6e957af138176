"""What a VM's guest sees when the supervisor boots it (``qm start`` on its node asks for that):
the GPUs the VM's configuration passes through, at the addresses QEMU gives them, and what the
guest's NVIDIA driver will say about P2P between them.

The lab's model of the driver's P2P gate (NVIDIA's open kernel driver, ``p2p_caps.c`` and
``chipset_pcie.c``, as quoted in ``docs/provision-vm.md``): the emulated host bridge is in no
chipset allow-list, so without a hypervisor-granted GPUDirect clique every pair reports CNS
("chipset not supported"). A clique counts only when the hypervisor is visible (no ``kvm=off``),
the device id took it (``-set device.hostpciN…`` on a single-function id) and both GPUs sit on
PCIe ports of a q35 machine (``pcie=1``); then pairs sharing a clique report OK.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from gpuhost.lab.node import iommu_groups
from gpuhost.lab.node import paths as node_paths
from gpuhost.lab.node.state import NodeState

# i440fx: hostpci0..3 on pci.0 at these slots, the rest behind the pci.1 bridge (qemu-server PCI.pm)
_LEGACY_SLOTS = {0: "00:10.0", 1: "00:11.0", 2: "00:1b.0", 3: "00:1c.0"}


@dataclass(frozen=True)
class _Kvm:
    vfio: dict[str, tuple[str, str]]  # device id -> (host BDF, bus)
    cliques: dict[str, str]  # device id -> x-nv-gpudirect-clique
    machine: str
    kvm_off: bool


def _read_kvm(argv: list[str]) -> _Kvm:
    """What QEMU makes of the options that matter for GPUs (the lab's own reading, not gpuhost's):
    ``-device vfio-pci,host=…,id=…,bus=…`` (qdev keyval: the driver first, then ``key=value``);
    ``-set device.ID.PROP=VALUE`` (QEMU softmmu/vl.c ``qemu_set_option``: ``sscanf("%63[^.].%63[^.].%63[^=]")``,
    so ID has no dot); ``-machine type=…`` (or a bare first item); ``-cpu MODEL,…,kvm=off`` (qemu-server
    CPUConfig.pm:933-938 adds it for x-vga / hidden=1)."""
    vfio: dict[str, tuple[str, str]] = {}
    cliques: dict[str, str] = {}
    machine, kvm_off = "", False
    for option, value in zip(argv, argv[1:], strict=False):
        parts = value.split(",")
        if option == "-device" and parts[0] == "vfio-pci":
            props = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            vfio[props.get("id", "")] = (props.get("host", ""), props.get("bus", ""))
        elif option == "-set":
            m = re.fullmatch(r"device\.([^.]{1,63})\.x-nv-gpudirect-clique=(.*)", value)
            if m:
                cliques[m.group(1)] = m.group(2)
        elif option == "-machine":
            props = dict(p.split("=", 1) for p in parts if "=" in p)
            machine = props.get("type", parts[0] if "=" not in parts[0] else "")
        elif option == "-cpu" and "kvm=off" in parts[1:]:
            kvm_off = True
    return _Kvm(vfio, cliques, machine, kvm_off)


def guest_gpus(host_gpus: list[dict[str, object]], argv: list[str]) -> list[dict[str, object]]:
    """The guest's GPU entries, from the kvm command line QEMU was started with, in device order."""
    cmd = _read_kvm(argv)
    q35 = "q35" in cmd.machine
    by_bdf = {str(g["bdf"]): g for g in host_gpus}
    out: list[dict[str, object]] = []
    for dev_id, (host_bdf, bus) in cmd.vfio.items():
        host = by_bdf.get(host_bdf)
        if host is None:
            continue
        pcie = q35 and bus.startswith("ich9-pcie-port-")
        n = len(out)
        if pcie:
            port = int(bus.rsplit("-", 1)[1])
            bdf, bridges = f"0000:{port:02x}:00.0", [f"0000:00:1c.{(port - 1) % 8}"]
        else:
            bdf, bridges = f"0000:{_LEGACY_SLOTS.get(n, f'01:{n:02x}.0')}", []
        clique = cmd.cliques.get(dev_id)
        out.append(
            {
                **host,
                "bdf": bdf,
                "bridges": bridges,
                "switch": None,
                "root_complex": 0,
                "numa": 0,
                "index": n,
                "host_bdf": host_bdf,
                "vm_pcie": pcie,
                "vm_clique": int(clique) if clique is not None and clique.isdigit() else None,
                "vm_hypervisor_visible": not cmd.kvm_off,
            }
        )
    return out


def prepare(host_upper: Path, guest_upper: Path, vmid: int, argv: list[str]) -> None:
    """Write the guest's description (node.json) for this start of VM ``vmid``."""
    host_state = NodeState.from_json((host_upper / node_paths.NODE_STATE.lstrip("/")).read_text())
    guest_file = guest_upper / node_paths.NODE_STATE.lstrip("/")
    guest = NodeState.from_json(guest_file.read_text())
    hw = dict(host_state.extra.get("gpu") or {})
    hw["gpus"] = guest_gpus(list(hw.get("gpus", [])), argv)
    hw["numa"] = 1
    hw["iommu_groups"] = iommu_groups.by_rule(hw["gpus"])  # the guest's own (virtual) PCI tree, not the host's
    guest.extra["gpu"] = hw
    guest.extra["vm"] = {"vmid": vmid, "argv": argv}
    guest_file.write_text(guest.to_json())


def parse_request(words: list[str]) -> tuple[int, list[str]]:
    """``vm-start VMID JSON`` (the JSON list of the kvm process's argv) from a node's socket."""
    vmid = int(words[0])
    argv = json.loads(" ".join(words[1:])) if len(words) > 1 else []
    return vmid, [str(a) for a in argv]


def request_line(verb: str, vmid: int, argv: list[str] | None = None) -> str:
    return " ".join([verb, str(vmid), *([json.dumps(argv)] if argv is not None else [])]) + "\n"
