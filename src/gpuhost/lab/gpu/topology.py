"""Where a node's GPUs sit: PCI addresses, switches, NUMA nodes, IOMMU-relevant bridges, CPUs.

EPYC/Xeon-like layout: each NUMA node (socket) has root complexes at buses 0x00/0x20/0x40/0x60
(socket 0) and 0x80/0xa0/0xc0/0xe0 (socket 1). GPUs come in pairs behind one PCIe switch per
root complex (``PIX`` between the two), pairs of one socket meet at the host bridge interconnect
(``NODE``), and GPUs of different sockets cross the SMP link (``SYS``).
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
from dataclasses import asdict

from gpuhost.errors import UsageError
from gpuhost.lab.gpu.catalog import GpuModel
from gpuhost.lab.node import iommu_groups

CORES_PER_SOCKET = 64
ROOT_COMPLEXES = {
    1: [0x00, 0x20, 0x40, 0x60, 0x80, 0xA0, 0xC0, 0xE0],
    2: [[0x00, 0x20, 0x40, 0x60], [0x80, 0xA0, 0xC0, 0xE0]],
}
MAX_GPUS = 16
CPUS = {
    "amd": {
        "vendor_id": "AuthenticAMD",
        "model_name": "AMD EPYC 9554 64-Core Processor",
        "family": "25",
        "model": "17",
        "stepping": "1",
    },
    "intel": {
        "vendor_id": "GenuineIntel",
        "model_name": "INTEL(R) XEON(R) PLATINUM 8592+",
        "family": "6",
        "model": "207",
        "stepping": "2",
    },
}


def _bdf(bus: int, dev: int = 0, fn: int = 0) -> str:
    return f"0000:{bus:02x}:{dev:02x}.{fn}"


def cpulist(numa_node: int, sockets: int) -> str:
    c = CORES_PER_SOCKET
    first, second = numa_node * c, sockets * c + numa_node * c
    return f"{first}-{first + c - 1},{second}-{second + c - 1}"


def plan(node: str, cpu: str, count: int, gpu_model: GpuModel, numa: int) -> dict[str, object]:
    """The ``gpu`` entry of the node's description (node.json ``extra``)."""
    if not 0 <= count <= MAX_GPUS:
        raise UsageError(f"--gpus must be between 0 and {MAX_GPUS}, got {count}")
    if numa not in (1, 2):
        raise UsageError(f"--numa must be 1 or 2, got {numa}")
    per_node = [count // numa + (1 if n < count % numa else 0) for n in range(numa)]
    gpus: list[dict[str, object]] = []
    for n in range(numa):
        complexes = ROOT_COMPLEXES[1] if numa == 1 else ROOT_COMPLEXES[2][n]  # type: ignore[index]
        remaining = per_node[n]
        k = 0
        while remaining > 0:
            base = complexes[k % len(complexes)] + 0x10 * (k // len(complexes))  # type: ignore[index, arg-type]
            pair = min(2, remaining)
            root_port = _bdf(base, 1, 1)
            if pair == 2:
                upstream, downstream = _bdf(base + 1), [_bdf(base + 2, 0), _bdf(base + 2, 1)]
                for slot in range(2):
                    gpus.append(
                        {
                            "bdf": _bdf(base + 3 + slot),
                            "numa": n,
                            "root_complex": base,
                            "switch": base + 1,
                            "bridges": [root_port, upstream, downstream[slot]],
                        }
                    )
            else:
                gpus.append(
                    {"bdf": _bdf(base + 1), "numa": n, "root_complex": base, "switch": None, "bridges": [root_port]}
                )
            remaining -= pair
            k += 1
    gpus.sort(key=lambda g: str(g["bdf"]))
    m = asdict(gpu_model)
    for index, g in enumerate(gpus):
        digest = hashlib.sha256(f"{node}/{g['bdf']}".encode()).hexdigest()
        g.update(
            {
                "index": index,
                "name": gpu_model.name,
                "device_id": gpu_model.device_id,
                "subsys_id": gpu_model.subsys_id,
                "uuid": f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_URL, node + str(g['bdf']))}",
                "serial": "1795025" + str(int(digest[:10], 16))[:6].rjust(6, "0"),
                "vbios": gpu_model.vbios,
                "memory_mib": gpu_model.memory_mib,
                "bar1_mib": gpu_model.bar1_mib,
                "arch": gpu_model.arch,
                "compute_cap": gpu_model.compute_cap,
                "cpulist": cpulist(int(g["numa"]), numa),  # type: ignore[call-overload]
                "gen_max": gpu_model.gen_max,
                "width_max": gpu_model.width_max,
                "idle_gen": 1,
                "irq": 180 + 2 * index,
                "needs_open_module": gpu_model.needs_open_module,
                "power_limit_w": gpu_model.power_limit_w,
                "class_code": m["class_code"],
                "class_name": m["class_name"],
                "codename": m["codename"],
                "bar2_size": m["bar2_size"],
                "rev": "a1",
            }
        )
    return {
        "model": gpu_model.name if count else None,
        "numa": numa,
        "gpus": gpus,
        "iommu_groups": iommu_groups.by_rule(gpus),
        "cpu": {**CPUS[cpu], "sockets": numa, "cores_per_socket": CORES_PER_SOCKET},
    }
