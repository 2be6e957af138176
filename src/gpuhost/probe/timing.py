"""Event-timed batches of copies on held streams.

A *lane* is one stream with its start/stop events, on one device. A batch is timed
from the first lane's start event to its stop event; other lanes start when the
first lane starts and the first lane's stop waits for them, so a bidirectional
batch is timed as a whole, the way cuda-samples does it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .cuda import CudaDriver
from .hold import StreamGate


@dataclass
class Lane:
    """A stream and two events on the device whose primary context is ``ctx``."""

    ctx: int
    stream: int
    start: int
    stop: int

    @classmethod
    def create(cls, drv: CudaDriver, ctx: int) -> Lane:
        drv.set_current(ctx)
        return cls(ctx, drv.stream_create(), drv.event_create(), drv.event_create())

    def destroy(self, drv: CudaDriver) -> None:
        drv.set_current(self.ctx)
        drv.event_destroy(self.start)
        drv.event_destroy(self.stop)
        drv.stream_destroy(self.stream)


#: Queues one copy on the lane's stream (its context is current when called).
Enqueue = Callable[[int], None]


@dataclass
class Batch:
    """The time of one held batch and whether the stream stayed held throughout."""

    ms: float
    held: bool


def run_batch(
    drv: CudaDriver, gate: StreamGate, lanes: Sequence[Lane], work: Sequence[Enqueue], reps: int, hold: bool = True
) -> Batch:
    """Time ``reps`` copies per lane (``work[k]`` on ``lanes[k]``) queued behind the gate.

    ``hold=False`` times the copies as they are queued, for copies long enough that
    queueing costs nothing next to them and that cannot be queued ahead (the driver
    blocks the caller while it stages a peer copy through host memory).
    """
    first = lanes[0]
    if hold:
        gate.close_gate()
    try:
        drv.set_current(first.ctx)
        if hold:
            gate.park(first.ctx, first.stream)
        drv.event_record(first.start, first.stream)
        for lane in lanes[1:]:
            drv.set_current(lane.ctx)
            drv.stream_wait_event(lane.stream, first.start)
        for _ in range(reps):  # interleaved, so unheld lanes also overlap
            for lane, enqueue in zip(lanes, work, strict=False):
                if len(lanes) > 1:
                    drv.set_current(lane.ctx)
                enqueue(lane.stream)
        for lane in lanes[1:]:
            drv.set_current(lane.ctx)
            drv.event_record(lane.stop, lane.stream)
            drv.set_current(first.ctx)
            drv.stream_wait_event(first.stream, lane.stop)
        drv.set_current(first.ctx)
        drv.event_record(first.stop, first.stream)
    finally:
        held = gate.open() if hold else True
    drv.set_current(first.ctx)
    drv.event_synchronize(first.stop)  # the other lanes' stops are behind it
    return Batch(drv.event_elapsed_ms(first.start, first.stop), held)


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("median of nothing")
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2.0


@dataclass
class Series:
    """Samples of one quantity (GB/s or µs), the median, and how many samples the
    watchdog had to release (those include queueing time)."""

    unit: str
    samples: list[float]
    unheld: int
    held: bool = True

    @property
    def value(self) -> float:
        return median(self.samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": round(self.value, 4),
            "unit": self.unit,
            "samples": [round(s, 4) for s in self.samples],
            "unheld_samples": self.unheld,
            "stream_held": self.held,
        }


def bandwidth_gbps(nbytes_per_copy: int, copies: int, ms: float) -> float:
    """GB/s with GB = 1e9 bytes, as both nvbandwidth and cuda-samples count."""
    return nbytes_per_copy * copies / (ms / 1e3) / 1e9 if ms > 0 else 0.0


def latency_us(copies: int, ms: float) -> float:
    return ms * 1e3 / copies
