"""Builds the probe's JSON report, step by step, so that a partial report can always be printed."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from . import PROBE_VERSION, SCHEMA_VERSION
from .cuda import CudaDriver, CudaError, CudaUnavailable, load_driver
from .hold import HoldUnavailable
from .measure import Bench, Settings
from .nvml_facts import Nvml
from .system_facts import host_facts, nvidia_smi_facts

#: Exit statuses of the probe.
EXIT_MEASURED = 0
EXIT_CANNOT_RUN = 2
EXIT_DEADLINE = 3

# Hints for CUDA errors seen on Proxmox hosts and containers (cuInit failures mostly).
CUDA_HINTS = {
    "CUDA_ERROR_UNKNOWN": "in an LXC this usually means /dev/nvidia-uvm is missing or not allowed "
    "(load nvidia_uvm on the host and pass the uvm devices)",
    "CUDA_ERROR_NO_DEVICE": "no GPU visible to CUDA (CUDA_VISIBLE_DEVICES, or /dev/nvidia* not passed in)",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "the user-space driver differs from the kernel module; install the "
    "same version in the container",
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": "a cuda-compat library is on LD_LIBRARY_PATH; remove it",
    "CUDA_ERROR_SYSTEM_NOT_READY": "Fabric Manager is not running (NVSwitch systems)",
    "CUDA_ERROR_OPERATING_SYSTEM": "the OS refused the driver call (container device permissions?)",
}


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Probe:
    """One run: facts, then measurements, into ``self.report``."""

    def __init__(
        self,
        settings: Settings,
        devices: list[int] | None = None,
        pairs: bool = True,
        staged: bool = True,
        nccl: str = "auto",
    ) -> None:
        self.settings = settings
        self.devices = devices
        self.pairs = pairs
        self.staged = staged
        self.nccl = nccl
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.stage = "start"
        self.report: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "tool": "gpuhost-probe",
            "probe_version": PROBE_VERSION,
            "started_at": now_iso(),
            "status": "running",
            "settings": settings.to_json(),
            "host": {},
            "driver": {},
            "errors": [],
            "gpus": [],
            "pairs": [],
            "nvidia_smi": None,
            "nccl": None,
        }

    # -- bookkeeping --------------------------------------------------------------------
    def error(self, stage: str, message: str, **extra: Any) -> None:
        item = {"stage": stage, "message": message}
        item.update(extra)
        with self.lock:
            self.report["errors"].append(item)

    def log(self, message: str) -> None:
        sys.stderr.write("[probe %5.1fs] %s\n" % (time.monotonic() - self.started, message))
        sys.stderr.flush()

    def snapshot(self) -> str:
        with self.lock:
            self.report["duration_s"] = round(time.monotonic() - self.started, 3)
            return json.dumps(self.report, indent=1, sort_keys=False, default=str)

    # -- the run ------------------------------------------------------------------------
    def run(self) -> int:
        self.stage = "host facts"
        self.report["host"] = host_facts()
        nvml = self._start_nvml()
        drv = self._start_cuda()
        if drv is None or not self._cuda_devices(drv):
            self.report["nvidia_smi"] = nvidia_smi_facts()
            self._nvml_only_inventory(nvml)
            self.report["status"] = "cannot_run"
            nvml.shutdown()
            return EXIT_CANNOT_RUN
        if nvml.error is not None:
            self.report["nvidia_smi"] = nvidia_smi_facts()
        try:
            self._measure(drv, nvml)
        finally:
            nvml.shutdown()
        if self.report["status"] == "running":
            self.report["status"] = "measured"
        return EXIT_MEASURED if self.report["status"] == "measured" else EXIT_CANNOT_RUN

    def _start_nvml(self) -> Nvml:
        self.stage = "nvml"
        nvml = Nvml()
        if nvml.error is not None:
            self.error("nvml", nvml.error)
        else:
            self.report["driver"].update(nvml.system())
        return nvml

    def _start_cuda(self) -> CudaDriver | None:
        self.stage = "cuda init"
        try:
            drv = load_driver()
        except CudaUnavailable as exc:
            self.error("cuda", str(exc))
            return None
        except CudaError as exc:
            self.error("cuda", str(exc), code=exc.name, hint=CUDA_HINTS.get(exc.name))
            return None
        self.report["driver"]["cuda_driver_api_version"] = drv.driver_version()
        return drv

    def _cuda_devices(self, drv: CudaDriver) -> list[int]:
        try:
            count = drv.device_count()
        except CudaError as exc:
            self.error("cuda", str(exc), code=exc.name, hint=CUDA_HINTS.get(exc.name))
            return []
        if count == 0:
            self.error("cuda", "CUDA sees no GPU", hint=CUDA_HINTS["CUDA_ERROR_NO_DEVICE"])
            return []
        wanted = self.devices if self.devices is not None else list(range(count))
        bad = [d for d in wanted if d < 0 or d >= count]
        if bad:
            self.error("cuda", "no CUDA device %s (CUDA sees %d)" % (bad, count))
            return []
        self.devices = wanted
        return wanted

    def _nvml_only_inventory(self, nvml: Nvml) -> None:
        """Without CUDA, still report what NVML knows about each GPU and pair."""
        if not nvml.ok:
            return
        try:
            handles = nvml.handles()
        except nvml.nv.NVMLError as exc:
            self.error("nvml", "cannot list GPUs: %s" % exc)
            return
        for idx, h in enumerate(handles):
            facts = nvml.gpu(h)
            facts.update({"index": idx, "measured": False})
            self.report["gpus"].append(facts)
        for i, hi in enumerate(handles):
            for j, hj in enumerate(handles):
                if i != j:
                    pair = {"src": i, "dst": j, "nvml": nvml.pair(hi, hj), "cuda": None}
                    self.report["pairs"].append(pair)

    def _measure(self, drv: CudaDriver, nvml: Nvml) -> None:
        assert self.devices is not None
        ordinals = self.devices
        handles: dict[int, Any] = {}
        for k in ordinals:
            dev = drv.device(k)
            bus = drv.bus_id(dev)
            gpu: dict[str, Any] = {"index": k, "measured": True}
            if nvml.ok:
                try:
                    handles[k] = nvml.handle_by_bus_id(bus)
                    gpu.update(nvml.gpu(handles[k]))
                except nvml.nv.NVMLError as exc:
                    self.error("nvml", "no NVML device at %s: %s" % (bus, exc))
            gpu.update(
                {
                    "name": gpu.get("name") or drv.device_name(dev),
                    "bus_id": bus,
                    "cuda_name": drv.device_name(dev),
                    "sm_count": drv.attribute(dev, 16),
                    "cuda_memory_bytes": drv.total_mem(dev),
                }
            )
            self.report["gpus"].append(gpu)

        self.stage = "allocating buffers"
        self.log("allocating %d MiB per buffer on %d GPU(s)" % (self.settings.size_bytes >> 20, len(ordinals)))
        try:
            bench = Bench(drv, ordinals, self.settings, nvml if nvml.ok else None, handles)
        except (CudaError, HoldUnavailable) as exc:
            self.error("setup", str(exc))
            self.report["status"] = "cannot_run"
            return
        self.report["settings"]["hold"] = bench.hold_method
        if bench.hold_rejected:
            self.report["settings"]["hold_rejected"] = bench.hold_rejected
        try:
            for gpu in self.report["gpus"]:
                k = gpu["index"]
                self.stage = "GPU%d local copies" % k
                self.log(self.stage)
                try:
                    gpu["local"] = bench.local(k)
                    load = gpu["local"]["link_under_load"]
                    if "pcie" in gpu:
                        gpu["pcie"]["gen_under_load"] = load["gen"]
                        gpu["pcie"]["width_under_load"] = load["width"]
                except CudaError as exc:
                    self.error("local", str(exc), gpu=k)
            if self.pairs and len(ordinals) > 1:
                self._measure_pairs(bench, nvml, handles)
        finally:
            self.stage = "releasing"
            try:
                bench.close()
            except CudaError as exc:
                self.error("teardown", str(exc))
        self._maybe_nccl(len(ordinals))

    def _measure_pairs(self, bench: Bench, nvml: Nvml, handles: dict[int, Any]) -> None:
        ordinals = list(bench.gpus)
        by_key: dict[Any, dict[str, Any]] = {}
        for i in ordinals:
            for j in ordinals:
                if i == j:
                    continue
                pair: dict[str, Any] = {"src": i, "dst": j}
                if nvml.ok and i in handles and j in handles:
                    pair["nvml"] = nvml.pair(handles[i], handles[j])
                try:
                    pair["cuda"] = bench.peer_capability(i, j)
                except CudaError as exc:
                    pair["cuda"] = None
                    self.error("peer capability", str(exc), pair=[i, j])
                by_key[(i, j)] = pair
                self.report["pairs"].append(pair)
        for a_pos, i in enumerate(ordinals):
            for j in ordinals[a_pos + 1 :]:
                fwd, back = by_key[(i, j)], by_key[(j, i)]
                if self.staged:
                    for src, dst, pair in ((i, j, fwd), (j, i, back)):
                        self.stage = "GPU%d->GPU%d staged" % (src, dst)
                        self.log(self.stage)
                        try:
                            pair["staged"] = bench.copies(src, dst, staged=True)
                        except CudaError as exc:
                            self.error("staged copies", str(exc), pair=[src, dst])
                both_can = all((p.get("cuda") or {}).get("can_access_peer") for p in (fwd, back))
                if not both_can:
                    for pair in (fwd, back):
                        pair["p2p"] = None
                        pair["p2p_skipped"] = "CUDA reports no peer access between these GPUs"
                    continue
                try:
                    bench.set_peer_access(i, j, True)
                except CudaError as exc:
                    self.error("enable peer access", str(exc), pair=[i, j])
                    for pair in (fwd, back):
                        pair["p2p"] = None
                        pair["p2p_skipped"] = "enabling peer access failed: %s" % exc
                    continue
                try:
                    for src, dst, pair in ((i, j, fwd), (j, i, back)):
                        self.stage = "GPU%d->GPU%d peer" % (src, dst)
                        self.log(self.stage)
                        try:
                            pair["p2p"] = bench.copies(src, dst)
                        except CudaError as exc:
                            self.error("peer copies", str(exc), pair=[src, dst])
                finally:
                    try:
                        bench.set_peer_access(i, j, False)
                    except CudaError as exc:
                        self.error("disable peer access", str(exc), pair=[i, j])

    def _maybe_nccl(self, world: int) -> None:
        if self.nccl == "off" or world < 2:
            return
        from .nccl_check import run_allreduce, torch_gpu_count

        self.stage = "NCCL all-reduce"
        seen = torch_gpu_count()
        if seen is None:
            self.report["nccl"] = {"skipped": "torch does not import with %s" % sys.executable}
            return
        if seen < world:
            self.report["nccl"] = {"skipped": "torch sees %d GPU(s), the probe %d" % (seen, world)}
            return
        self.log("NCCL all-reduce over %d GPUs" % world)
        self.report["nccl"] = run_allreduce(world)


class Deadline:
    """Prints the partial report and ends the process if the probe runs past ``seconds``."""

    def __init__(self, probe: Probe, seconds: float, emit: Any) -> None:
        self.probe = probe
        self.seconds = seconds
        self.emit = emit
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        if self._done.wait(self.seconds):
            return
        self.probe.error(
            "deadline", "the probe ran past %g s during '%s' and was stopped" % (self.seconds, self.probe.stage)
        )
        self.probe.report["status"] = "deadline"
        try:
            self.emit(self.probe.snapshot())
        finally:
            os._exit(EXIT_DEADLINE)
