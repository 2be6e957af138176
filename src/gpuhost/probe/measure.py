"""The measurements: per GPU (host links, local copies) and per pair (peer and staged).

Copies go through the copy engines (``cuMemcpy*Async``), as in nvbandwidth's ``_ce``
tests and cuda-samples' default. Peer copies use ``cuMemcpyPeerAsync`` on a stream
of the source GPU ("writes"); without peer access enabled, the driver stages the
same call through host memory, which is the "P2P disabled" path.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import integrity
from .cuda import P2P_ACCESS_SUPPORTED, P2P_NATIVE_ATOMIC_SUPPORTED, P2P_PERFORMANCE_RANK, CudaDriver, CudaError
from .hold import StreamGate, choose_method
from .nvml_facts import LinkSampler, Nvml
from .timing import Enqueue, Lane, Series, bandwidth_gbps, latency_us, run_batch

LATENCY_BYTES = 16


@dataclass
class Settings:
    size_bytes: int = 256 << 20
    bw_reps: int = 4
    lat_reps: int = 100
    samples: int = 5
    hold: str = "auto"
    hold_timeout_s: float = 3.0

    def to_json(self) -> dict[str, Any]:
        return {
            "size_bytes": self.size_bytes,
            "bw_reps": self.bw_reps,
            "lat_reps": self.lat_reps,
            "lat_bytes": LATENCY_BYTES,
            "samples": self.samples,
            "hold": self.hold,
            "hold_timeout_s": self.hold_timeout_s,
        }


@dataclass
class Gpu:
    """One device's context, buffers and timing lanes."""

    ordinal: int
    dev: int
    ctx: int
    src: int  # holds the pattern
    dst: int  # zeroed before each checked batch
    lane: Lane
    lane2: Lane  # a second stream, for the reverse direction of bidirectional batches
    nvml_handle: Any = None


@dataclass
class Integrity:
    """How many destinations were checked after measured batches, and what failed."""

    checked: int = 0
    failures: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"checked": self.checked, "failed": len(self.failures), "failures": self.failures[:20]}


class Bench:
    """Buffers on every GPU plus pinned host buffers, and the measurements over them."""

    def __init__(
        self,
        drv: CudaDriver,
        ordinals: Sequence[int],
        settings: Settings,
        nvml: Nvml | None = None,
        nvml_handles: dict[int, Any] | None = None,
    ) -> None:
        self.drv = drv
        self.s = settings
        self.nvml = nvml
        n = settings.size_bytes
        self.gpus: dict[int, Gpu] = {}
        for k in ordinals:
            dev = drv.device(k)
            ctx = drv.primary_context(dev)
            drv.set_current(ctx)
            gpu = Gpu(
                k,
                dev,
                ctx,
                drv.mem_alloc(n),
                drv.mem_alloc(n),
                Lane.create(drv, ctx),
                Lane.create(drv, ctx),
                (nvml_handles or {}).get(k),
            )
            self.gpus[k] = gpu
        first = self.gpus[ordinals[0]]
        drv.set_current(first.ctx)
        self.host_pattern = drv.host_alloc(n)
        self.host_back = drv.host_alloc(n)
        integrity.fill_pattern(self.host_pattern, n)
        for gpu in self.gpus.values():
            drv.set_current(gpu.ctx)
            drv.copy_htod(gpu.src, self.host_pattern, n)
            drv.synchronize()
        self.hold_rejected: list[str] = []
        self.hold_method = choose_method(drv, first.ctx, first.lane.stream, settings.hold, self.hold_rejected)
        self.gate = StreamGate(drv, self.hold_method, settings.hold_timeout_s)

    def close(self) -> None:
        drv = self.drv
        self.gate.free()
        for gpu in self.gpus.values():
            drv.set_current(gpu.ctx)
            drv.synchronize()
            gpu.lane.destroy(drv)
            gpu.lane2.destroy(drv)
            drv.mem_free(gpu.src)
            drv.mem_free(gpu.dst)
        drv.host_free(self.host_pattern)
        drv.host_free(self.host_back)
        for gpu in self.gpus.values():
            drv.release_primary_context(gpu.dev)

    # -- helpers ------------------------------------------------------------------------
    def _zero(self, gpu: Gpu, nbytes: int) -> None:
        self.drv.set_current(gpu.ctx)
        self.drv.memset_d8(gpu.dst, 0, nbytes)
        self.drv.synchronize()

    def _check_dst(self, gpu: Gpu, nbytes: int, what: str, result: Integrity) -> None:
        drv = self.drv
        drv.set_current(gpu.ctx)
        drv.copy_dtoh(self.host_back, gpu.dst, nbytes)
        result.checked += 1
        if not integrity.equal(self.host_back, self.host_pattern, nbytes):
            at = integrity.first_difference(self.host_back, self.host_pattern, nbytes)
            zeros = integrity.zero_fraction(self.host_back + (at or 0), nbytes - (at or 0))
            result.failures.append(
                "%s: first wrong byte at offset %s of %d (%.0f%% zeros from there)" % (what, at, nbytes, 100 * zeros)
            )

    def _series(
        self,
        lanes: Sequence[Lane],
        work: Sequence[Enqueue],
        reps: int,
        to_value: Callable[[float], float],
        unit: str,
        before: Callable[[], None] | None = None,
        check: Callable[[], None] | None = None,
        hold: bool = True,
    ) -> Series:
        run_batch(self.drv, self.gate, lanes, work, reps, hold)  # warm-up, not counted
        samples: list[float] = []
        unheld = 0
        for _ in range(self.s.samples):
            if before is not None:
                before()
            batch = run_batch(self.drv, self.gate, lanes, work, reps, hold)
            samples.append(to_value(batch.ms))
            if not batch.held:
                unheld += 1
                sys.stderr.write(
                    "[probe] watchdog released a held stream: the queue filled up; this sample includes enqueue time\n"
                )
            if check is not None:
                check()
        return Series(unit, samples, unheld, hold)

    # -- one GPU ------------------------------------------------------------------------
    def local(self, k: int) -> dict[str, Any]:
        """Pinned H2D and D2H, device-local copy bandwidth, and the 16-byte local latency."""
        drv, gpu, n, reps = self.drv, self.gpus[k], self.s.size_bytes, self.s.bw_reps
        checks = Integrity()
        bw = lambda ms: bandwidth_gbps(n, reps, ms)  # noqa: E731
        out: dict[str, Any] = {}

        sampler = LinkSampler(self.nvml, gpu.nvml_handle) if self.nvml is not None else None
        if sampler is not None:
            sampler.__enter__()
        try:
            out["h2d"] = self._series(
                [gpu.lane],
                [lambda s: drv.copy_htod_async(gpu.dst, self.host_pattern, n, s)],
                reps,
                bw,
                "GB/s",
                before=lambda: self._zero(gpu, n),
            ).to_json()
            self._check_dst(gpu, n, "host->GPU%d" % k, checks)
            out["d2h"] = self._series(
                [gpu.lane], [lambda s: drv.copy_dtoh_async(self.host_back, gpu.src, n, s)], reps, bw, "GB/s"
            ).to_json()
        finally:
            if sampler is not None:
                sampler.__exit__()
        checks.checked += 1
        if not integrity.equal(self.host_back, self.host_pattern, n):
            checks.failures.append("GPU%d->host: copy differs from the pattern" % k)
        out["link_under_load"] = {
            "gen": sampler.max_gen if sampler else None,
            "width": sampler.max_width if sampler else None,
        }

        out["d2d"] = self._series(
            [gpu.lane],
            [lambda s: drv.copy_dtod_async(gpu.dst, gpu.src, n, s)],
            reps,
            bw,
            "GB/s",
            before=lambda: self._zero(gpu, n),
        ).to_json()
        self._check_dst(gpu, n, "GPU%d local copy" % k, checks)
        out["d2d_latency"] = self._series(
            [gpu.lane],
            [lambda s: drv.copy_dtod_async(gpu.dst, gpu.src, LATENCY_BYTES, s)],
            self.s.lat_reps,
            lambda ms: latency_us(self.s.lat_reps, ms),
            "us",
        ).to_json()
        out["integrity"] = checks.to_json()
        out["copies_per_sample"] = reps
        return out

    # -- pairs --------------------------------------------------------------------------
    def peer_capability(self, i: int, j: int) -> dict[str, Any]:
        drv, a, b = self.drv, self.gpus[i], self.gpus[j]
        out: dict[str, Any] = {"can_access_peer": drv.can_access_peer(a.dev, b.dev)}
        for key, attr in (
            ("access_supported", P2P_ACCESS_SUPPORTED),
            ("performance_rank", P2P_PERFORMANCE_RANK),
            ("native_atomics", P2P_NATIVE_ATOMIC_SUPPORTED),
        ):
            try:
                out[key] = drv.p2p_attribute(attr, a.dev, b.dev)
            except CudaError as exc:
                out[key] = None
                out.setdefault("errors", []).append(str(exc))
        return out

    def set_peer_access(self, i: int, j: int, enabled: bool) -> None:
        """Peer access between the two GPUs, both directions."""
        drv, a, b = self.drv, self.gpus[i], self.gpus[j]
        for x, y in ((a, b), (b, a)):
            drv.set_current(x.ctx)
            if enabled:
                drv.enable_peer_access(y.ctx)
            else:
                drv.disable_peer_access(y.ctx)

    def copies(self, i: int, j: int, staged: bool = False) -> dict[str, Any]:
        """Uni- and bidirectional bandwidth and 16-byte latency from GPU i to GPU j, each
        destination checked against the pattern after every measured batch.

        Host-staged bandwidth copies are not queued behind a held stream: the driver makes
        the caller wait while it stages them through host memory, so a held stream would
        only wait for the watchdog. At 256 MiB a copy, queueing costs nothing next to them.
        Staged 16-byte copies queue fine and are held like the others."""
        drv, a, b, n, reps = self.drv, self.gpus[i], self.gpus[j], self.s.size_bytes, self.s.bw_reps
        hold_bw = not staged
        checks = Integrity()

        def fwd(nbytes: int) -> Enqueue:
            return lambda s: drv.copy_peer_async(b.dst, b.ctx, a.src, a.ctx, nbytes, s)

        def rev(nbytes: int) -> Enqueue:
            return lambda s: drv.copy_peer_async(a.dst, a.ctx, b.src, b.ctx, nbytes, s)

        def zero(*gpus: Gpu, nbytes: int = n) -> Callable[[], None]:
            def run() -> None:
                for g in gpus:
                    self._zero(g, nbytes)

            return run

        def check(nbytes: int, bidi: bool = False) -> Callable[[], None]:
            def run() -> None:
                self._check_dst(b, nbytes, "GPU%d->GPU%d" % (i, j), checks)
                if bidi:
                    self._check_dst(a, nbytes, "GPU%d->GPU%d (bidirectional)" % (j, i), checks)

            return run

        out: dict[str, Any] = {}
        out["uni"] = self._series(
            [a.lane],
            [fwd(n)],
            reps,
            lambda ms: bandwidth_gbps(n, reps, ms),
            "GB/s",
            before=zero(b),
            check=check(n),
            hold=hold_bw,
        ).to_json()
        out["bidi"] = self._series(
            [a.lane, b.lane2],
            [fwd(n), rev(n)],
            reps,
            lambda ms: bandwidth_gbps(2 * n, reps, ms),
            "GB/s",
            before=zero(a, b),
            check=check(n, bidi=True),
            hold=hold_bw,
        ).to_json()
        lr = self.s.lat_reps
        out["latency"] = self._series(
            [a.lane],
            [fwd(LATENCY_BYTES)],
            lr,
            lambda ms: latency_us(lr, ms),
            "us",
            before=zero(b, nbytes=LATENCY_BYTES),
            check=check(LATENCY_BYTES),
        ).to_json()
        out["integrity"] = checks.to_json()
        out["copies_per_sample"] = reps
        return out
