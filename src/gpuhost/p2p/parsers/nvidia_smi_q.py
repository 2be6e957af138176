"""``nvidia-smi -q`` (the full query) as :class:`Evidence`: each GPU's identity, PCIe link and BAR1.

The output is an indented tree (``Key : value`` leaves under section names, four spaces a level):
``GPU 00000000:01:00.0`` opens a GPU, ``PCI`` → ``GPU Link Info`` → ``PCIe Generation`` / ``Link Width`` carry
``Max`` and ``Current``, ``BAR1 Memory Usage`` → ``Total``, ``GPU Virtualization Mode`` → ``Virtualization
Mode``. ``Current`` PCIe generation drops at idle (P8 and the like: ASPM/power states), so it is kept as the
idle figure only; the link width does not change with load and is judged. No copy is timed.
"""

from __future__ import annotations

import re

from gpuhost.p2p.evidence import Evidence, GpuEvidence

_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_LEAF = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")
_SECTION = re.compile(r"^(\s*)(\S.*?)\s*$")


def looks_like(text: str) -> bool:
    return bool(re.search(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$", text, re.M)) and (
        "GPU Link Info" in text or "Product Name" in text
    )


def _tree(lines: list[str]) -> dict[str, str]:
    """The GPU's leaves as ``Section/Sub/Key`` → value (four spaces per level under the GPU line)."""
    out: dict[str, str] = {}
    path: list[tuple[int, str]] = []
    for line in lines:
        if not line.strip():
            continue
        m = _LEAF.match(line)
        indent = len(line) - len(line.lstrip())
        while path and path[-1][0] >= indent:
            path.pop()
        if m and m.group(3) != "":
            key = "/".join([p for _, p in path] + [m.group(2).strip()])
            out.setdefault(key, m.group(3))
        elif s := _SECTION.match(line):
            path.append((indent, s.group(2).rstrip(":").strip()))
    return out


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    m = re.match(r"^(\d+)", value.strip())
    return int(m.group(1)) if m else None


def _mib(value: str | None) -> int | None:
    n = _int(value)
    return n * (1 << 20) if n is not None and value and "MiB" in value else None


def parse(text: str) -> Evidence:
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if m := _GPU.match(line.strip()) if not line.startswith(" ") else None:
            blocks.append((m.group(1), []))
        elif blocks:
            blocks[-1][1].append(line)
    gpus = []
    for index, (bus, lines) in enumerate(blocks):
        t = _tree(lines)
        link = "PCI/GPU Link Info"
        virt = t.get("GPU Virtualization Mode/Virtualization Mode") or t.get(
            "GPU Virtualization Mode/Virtualization mode"
        )
        gpus.append(
            GpuEvidence(
                index=index,
                name=t.get("Product Name"),
                bus_id=bus.upper(),
                pcie_gen_max=_int(t.get(f"{link}/PCIe Generation/Max")),
                pcie_width_max=_int(t.get(f"{link}/Link Width/Max")),
                pcie_width_idle=_int(t.get(f"{link}/Link Width/Current")),
                bar1_bytes=_mib(t.get("BAR1 Memory Usage/Total")),
                memory_bytes=_mib(t.get("FB Memory Usage/Total")),
                virtualization=virt.lower().replace("pass-through", "passthrough") if virt and virt != "N/A" else None,
            )
        )
    notes = [
        "nvidia-smi -q times no copy: the PCIe link and BAR1 are judged, peer-to-peer is not; the current PCIe "
        "generation is an idle figure (it drops in low power states) and is not judged"
    ]
    return Evidence(source="nvidia-smi -q", gpus=gpus, notes=notes)
