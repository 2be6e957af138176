"""lspci (pciutils 3.9 on Debian 12) for the node's simulated PCI devices: ``-n``/``-nn``,
``-k``, ``-D``, ``-v``/``-vv``, ``-d VENDOR:[DEVICE]``, ``-s [[DOMAIN:]BUS:]SLOT[.FUNC]``."""

from __future__ import annotations

import os
import sys

from gpuhost.lab.node.nvidia import kernel
from gpuhost.lab.node.nvidia import paths as kpaths
from gpuhost.lab.node.state import load as load_state

SPEED = {1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s", 5: "32GT/s"}
AMD_ROOT_PORT = ("PCI bridge", "0604", "Advanced Micro Devices, Inc. [AMD] Device", "1022", "14ab", None)
SWITCH_PORT = ("PCI bridge", "0604", "Broadcom / LSI PEX890xx PCIe Gen 5 Switch", "1000", "c030", "b0")


def _devices() -> list[dict[str, object]]:
    st = load_state()
    gpus = list((st.extra.get("gpu") or {}).get("gpus", []))
    out: dict[str, dict[str, object]] = {}
    for g in gpus:
        chain = [*g.get("bridges", []), str(g["bdf"])]
        for i, bridge in enumerate(g.get("bridges", [])):
            cls, code, name, vendor, device, rev = AMD_ROOT_PORT if i == 0 else SWITCH_PORT
            below = int(chain[-1][5:7], 16)
            if bridge in out:  # a bridge above several GPUs: its bus range covers them all
                out[bridge]["subordinate"] = max(int(out[bridge]["subordinate"]), below)  # type: ignore[call-overload]
                continue
            out[bridge] = {
                "secondary": int(chain[i + 1][5:7], 16),
                "subordinate": below,
                "bdf": bridge,
                "class_name": cls,
                "class_code": code,
                "vendor_name": name,
                "vendor": vendor,
                "device": device,
                "rev": rev,
                "gpu": None,
                "port": ("Root Port (Slot+)", "Upstream Port", "Downstream Port (Slot+)")[min(i, 2)],
            }
        out[str(g["bdf"])] = {
            "bdf": g["bdf"],
            "class_name": g["class_name"],
            "class_code": g["class_code"],
            "vendor_name": "NVIDIA Corporation Device",
            "vendor": "10de",
            "device": g["device_id"],
            "rev": g["rev"],
            "gpu": g,
        }
    return [out[k] for k in sorted(out)]


def _driver(dev: dict[str, object]) -> tuple[str | None, str]:
    gpu = dev["gpu"]
    if gpu is None:
        return "pcieport", "pcieport" if dev["vendor"] == "1022" else ""
    bdf = str(dev["bdf"])
    modules = ["nvidiafb", "nouveau"]
    if kernel.module_file("nvidia"):
        modules += ["nvidia_drm", "nvidia"]
    if kernel.bindings().get(bdf) == "vfio-pci":
        return "vfio-pci", ", ".join(modules)
    if os.path.isdir(f"{kpaths.PROC_NVIDIA}/gpus/{bdf}"):
        return "nvidia", ", ".join(modules)
    return None, ", ".join(modules)


def _head(dev: dict[str, object], numeric: int, domain: bool) -> str:
    bdf = str(dev["bdf"]) if domain else str(dev["bdf"])[5:]
    rev = f" (rev {dev['rev']})" if dev["rev"] else ""
    if numeric >= 2:
        return (
            f"{bdf} {dev['class_name']} [{dev['class_code']}]: {dev['vendor_name']} "
            f"[{dev['vendor']}:{dev['device']}]{rev}"
        )
    if numeric == 1:
        return f"{bdf} {dev['class_code']}: {dev['vendor']}:{dev['device']}{rev}"
    name = f"{dev['vendor_name']} {dev['device']}" if str(dev["vendor_name"]).endswith("Device") else dev["vendor_name"]
    return f"{bdf} {dev['class_name']}: {name}{rev}"


def _verbose(dev: dict[str, object], level: int, numeric: int) -> list[str]:
    g = dev["gpu"]
    if g is None:
        return _bridge_verbose(dev, level)
    assert isinstance(g, dict)
    sub = (
        f"NVIDIA Corporation Device [10de:{g['subsys_id']}]"
        if numeric >= 2
        else f"NVIDIA Corporation Device {g['subsys_id']}"
    )
    lines = [f"\tSubsystem: {sub}"]
    if level == 1:
        lines += [
            f"\tFlags: bus master, fast devsel, latency 0, IRQ {g['irq']}, NUMA node {g['numa']}, IOMMU group "
            f"{_group(str(g['bdf']))}",
            "\tMemory at f0000000 (32-bit, non-prefetchable) [size=64M]",
            f"\tMemory at 20000000000 (64-bit, prefetchable) [size={g['bar2_size']}]",
            "\tCapabilities: [78] Express Endpoint, MSI 00",
        ]
        return lines
    gen, idle = int(g["gen_max"]), int(g["idle_gen"])
    sta = f"Speed {SPEED[idle]}{' (downgraded)' if idle < gen else ''}, Width x{g['width_max']}"
    lines += [
        f"\tPhysical Slot: {int(g['index']) + 1}",
        "\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- FastB2B- DisINTx+",
        "\tStatus: Cap+ 66MHz- UDF- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- >SERR- <PERR- INTx-",
        "\tLatency: 0",
        f"\tInterrupt: pin A routed to IRQ {g['irq']}",
        f"\tNUMA node: {g['numa']}",
        f"\tIOMMU group: {_group(str(g['bdf']))}",
        "\tRegion 0: Memory at f0000000 (32-bit, non-prefetchable) [size=64M]",
        f"\tRegion 1: Memory at 20000000000 (64-bit, prefetchable) [size={g['bar2_size']}]",
        "\tRegion 3: Memory at 22000000000 (64-bit, prefetchable) [size=32M]",
        "\tCapabilities: [40] Power Management version 3",
        "\t\tFlags: PMEClk- DSI- D1- D2- AuxCurrent=0mA PME(D0-,D1-,D2-,D3hot-,D3cold-)",
        "\t\tStatus: D0 NoSoftRst+ PME-Enable- DSel=0 DScale=0 PME-",
        "\tCapabilities: [78] Express (v2) Endpoint, MSI 00",
        "\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0, Latency L0s unlimited, L1 <64us",
        "\t\t\tExtTag+ AttnBtn- AttnInd- PwrInd- RBE+ FLReset+ SlotPowerLimit 75W",
        f"\t\tLnkCap:\tPort #0, Speed {SPEED[gen]}, Width x{g['width_max']}, ASPM L1, Exit Latency L1 unlimited",
        "\t\t\tClockPM+ Surprise- LLActRep- BwNot- ASPMOptComp+",
        "\t\tLnkCtl:\tASPM Disabled; RCB 64 bytes, Disabled- CommClk+",
        "\t\t\tExtSynch- ClockPM+ AutWidDis- BWInt- AutBWInt-",
        f"\t\tLnkSta:\t{sta}",
        "\t\t\tTrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-",
        f"\t\tLnkCap2: Supported Link Speeds: 2.5-{SPEED[gen]}, Crosslink- Retimer+ 2Retimers+ DRS-",
        f"\t\tLnkCtl2: Target Link Speed: {SPEED[gen]}, EnterCompliance- SpeedDis-",
        "\tCapabilities: [134 v1] Physical Resizable BAR",
        f"\t\tBAR 2: current size: {g['bar2_size']}, supported: 64MB 128MB 256MB 512MB 1GB 2GB 4GB 8GB 16GB 32GB "
        f"64GB {g['bar2_size']}",
    ]
    return lines


def _bridge_verbose(dev: dict[str, object], level: int) -> list[str]:
    """Root ports and switch ports: a Gen5 x16 link and ACS redirecting peer requests upstream."""
    # pciutils lspci.c show_htype1(): a bridge's bus numbers, at -v and above
    bus = (
        f"\tBus: primary={str(dev['bdf'])[5:7]}, secondary={dev['secondary']:02x}, subordinate={dev['subordinate']:02x}"
    )
    lines = [
        "\tFlags: bus master, fast devsel, latency 0, IRQ 40, NUMA node 0",
        bus + ", sec-latency=0",
        f"\tCapabilities: [58] Express (v2) {dev['port']}, MSI 00",
    ]
    if level < 2:
        return lines
    return lines + [
        "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM L1, Exit Latency L1 <64us",
        "\t\tLnkSta:\tSpeed 32GT/s, Width x16",
        "\t\t\tTrErr- Train- SlotClk+ DLActive+ BWMgmt- ABWMgmt-",
        "\tCapabilities: [2a0 v1] Access Control Services",
        "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-",
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-",
    ]


def _group(bdf: str) -> str:
    try:
        return os.path.basename(os.readlink(f"/sys/bus/pci/devices/{bdf}/iommu_group"))
    except OSError:
        return "-"


def _matches(dev: dict[str, object], vendor_filter: str | None, slot_filter: str | None) -> bool:
    if vendor_filter:
        v, _, d = vendor_filter.partition(":")
        if v and v.lower() != dev["vendor"]:
            return False
        if d and d.lower() != dev["device"]:
            return False
    if slot_filter:
        s = slot_filter.lower()
        bdf = str(dev["bdf"])
        if not (bdf == s or bdf[5:] == s or bdf.startswith(s) or bdf[5:].startswith(s)):
            return False
    return True


def main(argv: list[str]) -> int:
    numeric = verbose = 0
    kernel_drivers = domain = False
    vendor_filter = slot_filter = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-d", "-s") and i + 1 < len(argv):
            if arg == "-d":
                vendor_filter = argv[i + 1]
            else:
                slot_filter = argv[i + 1]
            i += 2
            continue
        if arg.startswith("-") and not arg.startswith("--"):
            for ch in arg[1:]:
                if ch == "n":
                    numeric += 1
                elif ch == "v":
                    verbose += 1
                elif ch == "k":
                    kernel_drivers = True
                elif ch == "D":
                    domain = True
                elif ch in "qQmtxbAPi":
                    pass
                else:
                    print(f"lspci: invalid option -- '{ch}'", file=sys.stderr)
                    return 2
        i += 1
    out: list[str] = []
    for dev in _devices():
        if not _matches(dev, vendor_filter, slot_filter):
            continue
        out.append(_head(dev, numeric, domain))
        if verbose:
            out += _verbose(dev, verbose, numeric)
        if kernel_drivers or verbose:
            driver, modules = _driver(dev)
            if kernel_drivers and not verbose and dev["gpu"] is not None:
                g = dev["gpu"]
                assert isinstance(g, dict)
                out.append(
                    f"\tSubsystem: NVIDIA Corporation Device [10de:{g['subsys_id']}]"
                    if numeric >= 2
                    else f"\tSubsystem: NVIDIA Corporation Device {g['subsys_id']}"
                )
            if driver:
                out.append(f"\tKernel driver in use: {driver}")
            if modules:
                out.append(f"\tKernel modules: {modules}")
        if verbose:
            out.append("")
    if out:
        print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
