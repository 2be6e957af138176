"""A batch is timed only once every copy is queued behind the held stream."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gpuhost.probe.hold import StreamGate
from gpuhost.probe.timing import Lane, Series, bandwidth_gbps, latency_us, median, run_batch


class FakeDriver:
    """Records the order of driver calls; elapsed time is fixed."""

    def __init__(self, block_enqueue_s: float = 0.0) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.block_enqueue_s = block_enqueue_s

    def set_current(self, ctx: int) -> None:
        self.calls.append(("ctx", ctx))

    def event_record(self, event: int, stream: int) -> None:
        self.calls.append(("record", event, stream))

    def stream_wait_event(self, stream: int, event: int) -> None:
        self.calls.append(("wait_event", stream, event))

    def event_synchronize(self, event: int) -> None:
        self.calls.append(("sync", event))

    def event_elapsed_ms(self, start: int, stop: int) -> float:
        return 10.0


class FakeGate(StreamGate):
    """The real gate logic (flag, watchdog) without pinned memory: the flag is a Python int."""

    def __init__(self, drv: FakeDriver, hold_timeout_s: float = 5.0) -> None:
        self.drv = drv  # type: ignore[assignment]
        self.method = "wait-value"
        self.hold_timeout_s = hold_timeout_s
        self._timer = None
        self.watchdog_fired = False
        self._flag = type("Flag", (), {"value": 1})()

    def park(self, ctx: int, stream: int) -> None:
        self.drv.calls.append(("park", stream, self._flag.value))


def _copy(drv: FakeDriver, gate: FakeGate, tag: str) -> Any:
    def enqueue(stream: int) -> None:
        if drv.block_enqueue_s:
            time.sleep(drv.block_enqueue_s)
        drv.calls.append(("copy", tag, stream, gate._flag.value))

    return enqueue


def test_copies_are_queued_while_the_gate_is_closed_and_timed_between_events() -> None:
    drv = FakeDriver()
    gate = FakeGate(drv)
    lane = Lane(ctx=1, stream=11, start=101, stop=102)
    batch = run_batch(drv, gate, [lane], [_copy(drv, gate, "a")], reps=3)  # type: ignore[arg-type]
    kinds = [c[0] for c in drv.calls if c[0] != "ctx"]
    assert kinds == ["park", "record", "copy", "copy", "copy", "record", "sync"]
    assert all(c[3] == 0 for c in drv.calls if c[0] == "copy")  # flag still closed while queueing
    assert gate._flag.value == 1  # released afterwards
    assert batch.held and batch.ms == 10.0


def test_second_lane_starts_with_the_first_and_the_first_waits_for_it() -> None:
    drv = FakeDriver()
    gate = FakeGate(drv)
    a = Lane(ctx=1, stream=11, start=101, stop=102)
    b = Lane(ctx=2, stream=22, start=201, stop=202)
    run_batch(drv, gate, [a, b], [_copy(drv, gate, "fwd"), _copy(drv, gate, "rev")], reps=2)  # type: ignore[arg-type]
    calls = [c for c in drv.calls if c[0] != "ctx"]
    assert ("wait_event", 22, 101) in calls  # lane b waits for a's start
    assert ("wait_event", 11, 202) in calls  # a's stop waits for b's stop
    assert calls.index(("wait_event", 11, 202)) < calls.index(("record", 102, 11))
    assert [c[1] for c in calls if c[0] == "copy"] == ["fwd", "rev", "fwd", "rev"]


def test_watchdog_releases_a_stuck_queue_and_marks_the_batch() -> None:
    drv = FakeDriver(block_enqueue_s=0.2)
    gate = FakeGate(drv, hold_timeout_s=0.05)
    lane = Lane(ctx=1, stream=11, start=101, stop=102)
    batch = run_batch(drv, gate, [lane], [_copy(drv, gate, "a")], reps=2)  # type: ignore[arg-type]
    assert not batch.held


def test_unheld_batches_do_not_park_the_stream() -> None:
    drv = FakeDriver()
    gate = FakeGate(drv)
    lane = Lane(ctx=1, stream=11, start=101, stop=102)
    batch = run_batch(drv, gate, [lane], [_copy(drv, gate, "a")], reps=1, hold=False)  # type: ignore[arg-type]
    assert "park" not in [c[0] for c in drv.calls]
    assert batch.held


def test_units() -> None:
    assert bandwidth_gbps(256 << 20, 4, 20.0) == pytest.approx(53.687, rel=1e-3)
    assert latency_us(100, 0.2) == pytest.approx(2.0)
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0, 3.0, 10.0]) == 2.5
    s = Series("GB/s", [1.0, 5.0, 3.0], unheld=1).to_json()
    assert s["value"] == 3.0 and s["unheld_samples"] == 1 and s["stream_held"] is True


class RecordingDriver:
    """Stands in for CudaDriver under the real StreamGate.park."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.current = 0

    def set_current(self, ctx: int) -> None:
        self.current = ctx
        self.calls.append(("ctx", ctx))

    def module_load_data(self, image: bytes) -> int:
        self.calls.append(("load", self.current))
        return 7

    def module_function(self, module: int, name: str) -> int:
        return 8

    def launch_single_thread(self, fn: int, stream: int, args: list[Any]) -> None:
        self.calls.append(("launch", self.current, stream))


def test_spin_kernel_is_loaded_and_launched_in_the_streams_own_context() -> None:
    # Regression: with two GPUs the kernel was loaded into whichever context was current,
    # its launch on GPU0's stream failed, and 'auto' silently fell back to wait-value.
    drv = RecordingDriver()
    gate = StreamGate.__new__(StreamGate)
    gate.drv = drv  # type: ignore[assignment]
    gate.method = "kernel"
    gate._kernels = {}
    gate._dptr = 0x1000
    drv.set_current(2)  # another GPU's context is current
    gate.park(1, 11)
    assert ("load", 1) in drv.calls and ("launch", 1, 11) in drv.calls
