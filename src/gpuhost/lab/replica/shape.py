"""From a bundle to a replica: the lab node's description (GPUs by PCI id and address, their bridges, NUMA
nodes and topology, boot loader, PVE major) and the host's own files it is seeded with; and what the lab
cannot reproduce, said before it starts."""

from __future__ import annotations

import hashlib
import re
import uuid as uuidlib
from dataclasses import asdict, dataclass, field

from gpuhost.errors import UsageError
from gpuhost.lab.gpu import topology
from gpuhost.lab.gpu.catalog import DEFAULT_MODEL, MODELS, GpuModel
from gpuhost.lab.node import iommu_groups
from gpuhost.lab.replica import parse
from gpuhost.lab.replica.bundle import Bundle
from gpuhost.lab.spec import PVE_MAJORS

#: the host's files a replica node is seeded with (bundle folder or file -> path in the node)
SEEDED = {
    "fs/etc/default/grub": "etc/default/grub",
    "fs/etc/default/grub.d": "etc/default/grub.d",
    "fs/etc/kernel/cmdline": "etc/kernel/cmdline",
    "fs/etc/modules": "etc/modules",
    "fs/etc/modprobe.d": "etc/modprobe.d",
    "fs/etc/modules-load.d": "etc/modules-load.d",
    "fs/etc/pve/lxc": "etc/pve/lxc",
    "fs/etc/pve/qemu-server": "etc/pve/qemu-server",
}
#: always out of a simulation's reach
NEVER = (
    "real PCIe/NVLink bandwidth and latency (p2p and bench figures are the lab's, not the host's)",
    "real CUDA, NCCL and GPU memory (the lab's libcuda is a stand-in)",
    "the host's storage (storage.cfg and pvesm status are in the bundle, the lab has its own local storages)",
    "cluster membership and HA state (the replica is a single node)",
)


@dataclass
class Replica:
    source: str  # the captured node's name, as the bundle shows it
    boot: str
    cpu: str
    pve: int
    gpu_model: str  # the lab model whose behaviour the GPUs borrow
    gpu_plan: dict[str, object]  # the node description's "gpu" entry (gpuhost.lab.gpu.topology.plan's shape)
    seed: dict[str, bytes] = field(default_factory=dict)  # path in the node -> content
    not_reproduced: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return len(self.gpu_plan["gpus"])  # type: ignore[arg-type]


def _model_for(device: str) -> GpuModel | None:
    for m in MODELS.values():
        if m.device_id == device:
            return m
    return None


def build(bundle: Bundle) -> Replica:
    """The replica of the bundle's node (UsageError, exit 2, when the bundle cannot describe one)."""
    source = str(bundle.manifest.get("node", "?"))
    notes: list[str] = []
    lspci_text = bundle.text("cmd/lspci-nnvv") or bundle.text("facts/lspci")
    if not lspci_text.strip() and parse.parse_lspci(bundle.text("cmd/iommu-groups")):
        lspci_text = bundle.text("cmd/iommu-groups")
        notes.append(
            "PCI devices: the bundle has no lspci; the functions are the IOMMU group listing's lspci -nns lines"
        )
    functions = parse.parse_lspci(lspci_text)
    gpus = [f for f in functions if f.is_nvidia_gpu]
    if len(gpus) > topology.MAX_GPUS:
        raise UsageError(f"{bundle.path}: {len(gpus)} GPUs; the lab simulates at most {topology.MAX_GPUS}")
    pbt_key = "files/cmd/proxmox-boot-tool-status"
    pbt_exit = bundle.exits.get(pbt_key, 127) if pbt_key in bundle.files else 127
    boot = parse.boot_loader(bundle.files.get(pbt_key, b"").decode(errors="replace"), pbt_exit)
    pve = parse.pve_major(bundle.text("cmd/pveversion-v") or bundle.text("facts/pveversion"))
    if pve is None or pve not in PVE_MAJORS:
        notes.append(f"PVE version: the bundle shows {pve or 'none'}; the replica runs PVE {PVE_MAJORS[0]}")
        pve = PVE_MAJORS[0]
    cmdlines = "\n".join(bundle.text(f) for f in ("fs/proc/cmdline", "fs/etc/kernel/cmdline", "fs/etc/default/grub"))
    cpu, found = parse.cpu_vendor(bundle.text("facts/cpu"), bundle.text("cmd/lscpu"), cmdlines)
    if found == "command line":
        notes.append(f"CPU vendor: not in the bundle; {cpu}, from the IOMMU token on the host's command line")
    elif not found:
        notes.append("CPU vendor: not in the bundle; the replica's CPU is amd")
    smi = parse.nvidia_smi_gpus(bundle.text("cmd/nvidia-smi-q"))
    numa_ids = sorted({g.numa for g in gpus if g.numa is not None}) or [0]
    if any(g.numa is None for g in gpus):
        notes.append("NUMA: lspci shows no NUMA node for some GPUs; they are placed on node 0")
    sockets = max(numa_ids) + 1
    entries: list[dict[str, object]] = []
    models: set[str] = set()
    for index, g in enumerate(sorted(gpus, key=lambda f: f.bdf)):
        known = _model_for(g.device)
        template = known or MODELS[DEFAULT_MODEL]
        if known is None:
            notes.append(
                f"GPU {g.bdf} [10de:{g.device}]: not a model the lab simulates; it keeps its PCI ids and name, "
                f"and behaves as the lab's {template.name} (architecture, memory, driver support)"
            )
        models.add(template.name)
        chain = parse.bridges_above(g, functions)
        numa = g.numa if g.numa is not None else 0
        info = smi.get(g.bdf, {})
        digest = hashlib.sha256(f"{source}/{g.bdf}".encode()).hexdigest()
        m = asdict(template)
        entries.append(
            {
                "bdf": g.bdf,
                "numa": numa,
                # the bus the outermost bridge sits on (a root complex), and the switch below it when there is one
                "root_complex": chain[0].bus if chain else g.bus,
                "switch": chain[0].secondary if len(chain) >= 2 else None,
                "bridges": [b.bdf for b in chain],
                "index": index,
                "name": info.get("name") or _name_from(g.description, template.name),
                "device_id": g.device,
                "subsys_id": g.subsys_device or template.subsys_id,
                "uuid": f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_URL, source + g.bdf)}",
                "serial": "1795025" + str(int(digest[:10], 16))[:6].rjust(6, "0"),
                "vbios": template.vbios,
                "memory_mib": int(info.get("memory_mib") or template.memory_mib),
                "bar1_mib": template.bar1_mib,
                "arch": template.arch,
                "compute_cap": template.compute_cap,
                "cpulist": topology.cpulist(numa, sockets),
                "gen_max": template.gen_max,
                "width_max": template.width_max,
                "idle_gen": 1,
                "irq": 180 + 2 * index,
                "needs_open_module": template.needs_open_module,
                "power_limit_w": template.power_limit_w,
                "class_code": g.class_code,
                "class_name": g.class_name,
                "codename": g.description.removeprefix("NVIDIA Corporation ").strip() or m["codename"],
                "bar2_size": template.bar2_size,
                "rev": g.rev or "a1",
            }
        )
    # pci.ids: 10de:22a3 "GH100 [H100 NVSwitch]", class 0680 (Bridge): NVLink switches, no GPU of the lab's
    nvswitches = [f.bdf for f in functions if f.vendor == "10de" and f.class_code == "0680"]
    if nvswitches:
        notes.append(
            f"NVSwitch: {len(nvswitches)} NVIDIA bridge(s) in the capture ({', '.join(nvswitches)}); the lab has "
            "no NVLink fabric (no fabric manager), the replica's GPUs reach each other over its PCI tree"
        )
    bound = [f"{g.bdf} to {g.driver}" for g in gpus if g.driver]
    if bound:
        notes.append("driver binding: the host had " + ", ".join(bound) + "; the replica's GPUs start unbound")
    if gpus and not any(parse.bridges_above(g, functions) for g in gpus):
        notes.append("PCI bridges: the capture lists none above the GPUs; each GPU sits on its root bus")
    notes.extend(_topology_notes(bundle, entries))
    if len(models) > 1:
        notes.append("mixed GPU models: each keeps its ids; the driver installers are the lab's default set")
    gpu_model = sorted(models)[0] if models else DEFAULT_MODEL
    groups, group_notes = _iommu_groups(bundle, entries)
    notes.extend(group_notes)
    plan: dict[str, object] = {
        "model": (entries[0]["name"] if entries else None),
        "numa": sockets,
        "gpus": entries,
        "iommu_groups": groups,
        "cpu": {**topology.CPUS[cpu], "sockets": sockets, "cores_per_socket": topology.CORES_PER_SOCKET},
    }
    seed: dict[str, bytes] = {}
    for folder, target in SEEDED.items():
        key = f"files/{folder}"
        if key in bundle.files and bundle.exits.get(key) in (0, None):
            seed[target] = bundle.files[key]
        for name, text in bundle.under(folder).items():
            seed[f"{target}/{name}"] = text.encode()
    booted = bundle.text("fs/proc/cmdline").strip()
    if booted:
        notes.append(
            "booted command line: the replica boots what its boot loader files say; the host booted: " + booted
        )
    notes.extend(NEVER)
    return Replica(source, boot, cpu, pve, gpu_model, plan, seed, notes)


def _iommu_groups(bundle: Bundle, entries: list[dict[str, object]]) -> tuple[list[dict[str, object]], list[str]]:
    """The host's IOMMU groups from its captured listing (``cmd/iommu-groups``: every function of every group,
    the ones the lab has no device for too); the lab's rule only where the bundle has no listing."""
    groups = iommu_groups.from_listing(bundle.text("cmd/iommu-groups"))
    if not groups:
        return iommu_groups.by_rule(entries), [
            "IOMMU groups: the bundle lists none (no listing, or the host's IOMMU was off); once the replica's "
            "IOMMU is on, each GPU and bridge is its own group (the lab's rule)"
        ]
    grouped = {bdf for bdf, _ in iommu_groups.members(groups)}
    loose = [str(e["bdf"]) for e in entries if e["bdf"] not in grouped]
    notes = [f"IOMMU groups: the host's {len(groups)} group(s), as captured (once the replica's IOMMU is on)"]
    if loose:
        notes.append(
            "IOMMU groups: the host's listing has no group for " + ", ".join(loose) + "; neither has the replica"
        )
    return groups, notes


def _name_from(description: str, fallback: str) -> str:
    m = re.search(r"\[([^\]]+)\]\s*$", description)
    return f"NVIDIA {m.group(1)}" if m else fallback


def _simulated_link(a: dict[str, object], b: dict[str, object]) -> str:
    """What the lab's nvidia-smi prints between two GPUs (gpuhost.lab.node.nvidia.gpus.Gpu.link)."""
    if a["numa"] != b["numa"]:
        return "SYS"
    if a["switch"] is not None and a["switch"] == b["switch"]:
        return "PIX"
    if a["root_complex"] == b["root_complex"]:
        return "PHB"
    return "NODE"


def _topology_notes(bundle: Bundle, entries: list[dict[str, object]]) -> list[str]:
    links = parse.topo_links(bundle.text("cmd/nvidia-smi-topo-m"))
    if not links:
        return ["GPU topology: the bundle has no nvidia-smi topo -m; the replica's is derived from the PCI tree"]
    notes: list[str] = []
    nvlink = sorted({v for v in links.values() if v.startswith("NV")})
    if nvlink:
        notes.append(f"NVLink ({', '.join(nvlink)}): not simulated; those pairs show their PCIe path in the replica")
    differ = [
        f"GPU{i}-GPU{j} {links[(i, j)]}->{_simulated_link(entries[i], entries[j])}"
        for (i, j) in sorted(links)
        if i < j < len(entries)
        and i < len(entries)
        and links[(i, j)] != _simulated_link(entries[i], entries[j])
        and not links[(i, j)].startswith("NV")
    ]
    if differ:
        notes.append("GPU topology differs from the host's topo -m: " + ", ".join(differ[:8]))
    return notes
