"""What NVML says about each GPU and each pair, read through the shipped ``pynvml``.

Every query is allowed to fail on its own (VMs and older drivers answer
NotSupported to many of them): a failed query leaves ``None`` and its error in
the GPU's ``nvml_errors``, never aborts the probe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

# nvidia-ml-py 13.6xx defines NVML_P2P_CAPS_INDEX_READ as the tuple ``(0,)`` (a stray
# comma), which ctypes cannot pass. The probe therefore uses the integer values.
P2P_INDEXES = (("read", 0), ("write", 1), ("nvlink", 2), ("atomics", 3), ("pci", 4))

#: NVML P2P status -> the letters ``nvidia-smi topo -p2p`` prints.
P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}

#: NVML topology level -> ``nvidia-smi topo -m`` label.
TOPOLOGY = {0: "INTERNAL", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

VIRTUALIZATION = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}

NVLINK_MAX_LINKS = 18
NVLINK_REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch", 255: "unknown"}


def sysfs_placement(bus_id: str | None, root: str = "/sys/bus/pci/devices") -> dict[str, Any]:
    """NUMA node and nearby CPUs of a PCI device, as ``nvidia-smi topo -m`` shows them (from sysfs)."""
    out: dict[str, Any] = {"numa_node": None, "cpu_affinity": None}
    if not bus_id or bus_id.count(":") != 2:
        return out
    domain, rest = bus_id.split(":", 1)
    path = "%s/%04x:%s" % (root, int(domain, 16), rest.lower())
    try:
        with open(path + "/numa_node") as f:
            node = int(f.read().strip())
        out["numa_node"] = node if node >= 0 else None
    except (OSError, ValueError):
        pass
    try:
        with open(path + "/local_cpulist") as f:
            out["cpu_affinity"] = f.read().strip() or None
    except OSError:
        pass
    return out


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class Nvml:
    """An initialised NVML session; ``error`` is set instead when it cannot start."""

    def __init__(self) -> None:
        self.nv: Any = None
        self.error: str | None = None
        try:
            import pynvml  # shipped beside the probe
        except ImportError as exc:
            self.error = "the pynvml module is not available: %s" % exc
            return
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            self.error = "nvmlInit failed: %s" % exc
            return
        except OSError as exc:
            self.error = "cannot load libnvidia-ml.so.1: %s" % exc
            return
        self.nv = pynvml

    @property
    def ok(self) -> bool:
        return self.nv is not None

    def shutdown(self) -> None:
        if self.nv is not None:
            try:
                self.nv.nvmlShutdown()
            except self.nv.NVMLError:
                pass

    def query(self, errors: dict[str, str], key: str, fn: Callable[[], Any]) -> Any:
        """``fn()``, or ``None`` with the NVML error recorded under ``key``."""
        try:
            return fn()
        except self.nv.NVMLError as exc:
            errors[key] = str(exc)
            return None

    # -- system -------------------------------------------------------------------
    def system(self) -> dict[str, Any]:
        nv = self.nv
        errors: dict[str, str] = {}
        out = {
            "driver_version": self.query(errors, "driver_version", lambda: _text(nv.nvmlSystemGetDriverVersion())),
            "nvml_version": self.query(errors, "nvml_version", lambda: _text(nv.nvmlSystemGetNVMLVersion())),
            "cuda_driver_version": self.query(errors, "cuda_driver_version", nv.nvmlSystemGetCudaDriverVersion),
            "device_count": self.query(errors, "device_count", nv.nvmlDeviceGetCount),
        }
        out["errors"] = errors
        return out

    def handles(self) -> list[Any]:
        return [self.nv.nvmlDeviceGetHandleByIndex(i) for i in range(self.nv.nvmlDeviceGetCount())]

    def handle_by_bus_id(self, bus_id: str) -> Any:
        return self.nv.nvmlDeviceGetHandleByPciBusId(bus_id.encode())

    # -- one GPU ------------------------------------------------------------------
    def gpu(self, h: Any) -> dict[str, Any]:
        nv = self.nv
        e: dict[str, str] = {}
        q = self.query
        pci = q(e, "pci", lambda: nv.nvmlDeviceGetPciInfo(h))
        mem = q(e, "memory", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        bar1 = q(e, "bar1", lambda: nv.nvmlDeviceGetBAR1MemoryInfo(h))
        virt = q(e, "virtualization_mode", lambda: nv.nvmlDeviceGetVirtualizationMode(h))
        power = q(e, "power", lambda: nv.nvmlDeviceGetPowerUsage(h))
        limit = q(e, "power_limit", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
        cc = q(e, "cuda_compute_capability", lambda: nv.nvmlDeviceGetCudaComputeCapability(h))
        bus_id = _text(pci.busId) if pci is not None else None
        return {
            **sysfs_placement(bus_id),
            "name": q(e, "name", lambda: _text(nv.nvmlDeviceGetName(h))),
            "uuid": q(e, "uuid", lambda: _text(nv.nvmlDeviceGetUUID(h))),
            "bus_id": _text(pci.busId) if pci is not None else None,
            "compute_capability": "%d.%d" % tuple(cc) if cc is not None else None,
            "memory_total_bytes": int(mem.total) if mem is not None else None,
            "bar1_total_bytes": int(bar1.bar1Total) if bar1 is not None else None,
            "virtualization_mode": VIRTUALIZATION.get(virt, str(virt)) if virt is not None else None,
            "power_w": round(power / 1000.0, 1) if power is not None else None,
            "power_limit_w": round(limit / 1000.0, 1) if limit is not None else None,
            "pcie": {
                "gen_current_idle": q(e, "pcie_gen_current", lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
                "gen_max": q(e, "pcie_gen_max", lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
                "gen_gpu_max": q(e, "pcie_gen_gpu_max", lambda: nv.nvmlDeviceGetGpuMaxPcieLinkGeneration(h)),
                "width_current_idle": q(e, "pcie_width_current", lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
                "width_max": q(e, "pcie_width_max", lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
                "replay_counter": q(e, "pcie_replay_counter", lambda: nv.nvmlDeviceGetPcieReplayCounter(h)),
                "gen_under_load": None,
                "width_under_load": None,
            },
            "nvlink": self.nvlink(h),
            "nvml_errors": e,
        }

    def nvlink(self, h: Any) -> dict[str, Any]:
        nv = self.nv
        active = 0
        versions: list[int] = []
        remotes: dict[str, int] = {}
        remote_types: dict[str, int] = {}
        error = None
        for link in range(NVLINK_MAX_LINKS):
            try:
                if not nv.nvmlDeviceGetNvLinkState(h, link):
                    continue
            except nv.NVMLError as exc:
                if link == 0:
                    error = str(exc)
                break
            active += 1
            try:
                versions.append(int(nv.nvmlDeviceGetNvLinkVersion(h, link)))
            except nv.NVMLError:
                pass
            try:
                bus = _text(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId)
                remotes[bus] = remotes.get(bus, 0) + 1
            except nv.NVMLError:
                pass
            try:
                kind = NVLINK_REMOTE_TYPES.get(nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link), "unknown")
                remote_types[kind] = remote_types.get(kind, 0) + 1
            except (nv.NVMLError, AttributeError):
                pass
        return {
            "active_links": active,
            "versions": sorted(set(versions)),
            "remote_bus_ids": remotes,
            "remote_types": remote_types,
            "error": error,
        }

    # -- one ordered pair ---------------------------------------------------------------
    def pair(self, h1: Any, h2: Any) -> dict[str, Any]:
        nv = self.nv
        e: dict[str, str] = {}
        status: dict[str, str | None] = {}
        for name, index in P2P_INDEXES:

            def p2p_status(i: int = index) -> Any:
                return nv.nvmlDeviceGetP2PStatus(h1, h2, i)

            code = self.query(e, "p2p_" + name, p2p_status)
            status[name] = P2P_STATUS.get(code, "code %s" % code) if code is not None else None
        level = self.query(e, "topology", lambda: nv.nvmlDeviceGetTopologyCommonAncestor(h1, h2))
        return {
            "status": status,
            "topology": TOPOLOGY.get(level, str(level)) if level is not None else None,
            "nvml_errors": e,
        }


class LinkSampler:
    """Samples the PCIe generation and width of one GPU while a copy loads its link."""

    def __init__(self, nvml: Nvml, handle: Any, period_s: float = 0.002) -> None:
        self.nvml = nvml
        self.handle = handle
        self.period_s = period_s
        self.max_gen: int | None = None
        self.max_width: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        nv = self.nvml.nv
        while not self._stop.is_set():
            try:
                gen = nv.nvmlDeviceGetCurrPcieLinkGeneration(self.handle)
                width = nv.nvmlDeviceGetCurrPcieLinkWidth(self.handle)
            except nv.NVMLError:
                return
            self.max_gen = gen if self.max_gen is None else max(self.max_gen, gen)
            self.max_width = width if self.max_width is None else max(self.max_width, width)
            time.sleep(self.period_s)

    def __enter__(self) -> LinkSampler:
        if self.nvml.ok and self.handle is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)

    def result(self) -> tuple[int | None, int | None]:
        return self.max_gen, self.max_width
