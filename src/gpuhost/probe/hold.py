"""Holding a stream until every copy of a measurement is queued.

Timing copies queued one by one from Python would measure Python. Like nvbandwidth
and cuda-samples, the probe first parks the stream on a flag in pinned host memory,
queues the start event, the copies and the stop event, then sets the flag: the GPU
then runs them back to back and the events time only the copies.

Two ways to park a stream:

* ``kernel``: a one-thread spin kernel, loaded from PTX embedded here
  (``cuModuleLoadData``; the driver compiles it), that polls the flag and gives
  up by itself after ``GPU_TIMEOUT_NS``;
* ``wait-value``: ``cuStreamWaitValue32`` on the flag's device address.

Either way a watchdog thread sets the flag after ``hold_timeout_s``, so a queue
that fills up (the driver blocks the enqueueing thread when it does) cannot hang
the probe; a measurement released that way is marked and not trusted.
"""

from __future__ import annotations

import ctypes
import threading

from .cuda import CudaDriver, CudaError

#: Upper bound the spin kernel waits on its own (10 s), independent of the host.
GPU_TIMEOUT_NS = 10 * 1000 * 1000 * 1000

SPIN_PTX = b"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry gpuhost_spin(
    .param .u64 gpuhost_spin_flag,
    .param .u64 gpuhost_spin_timeout
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [gpuhost_spin_flag];
    ld.param.u64 %rd2, [gpuhost_spin_timeout];
    cvta.to.global.u64 %rd3, %rd1;
    mov.u64 %rd4, %globaltimer;
$L_spin:
    ld.volatile.global.u32 %r1, [%rd3];
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $L_done;
    mov.u64 %rd5, %globaltimer;
    sub.s64 %rd6, %rd5, %rd4;
    setp.lt.u64 %p2, %rd6, %rd2;
    @%p2 bra $L_spin;
$L_done:
    ret;
}
\0"""

METHODS = ("kernel", "wait-value")


class HoldUnavailable(RuntimeError):
    """Neither way of holding a stream works on this driver."""


class StreamGate:
    """One host flag that parks streams on any device until :meth:`open` is called."""

    def __init__(self, drv: CudaDriver, method: str, hold_timeout_s: float = 5.0) -> None:
        self.drv = drv
        self.method = method
        self.hold_timeout_s = hold_timeout_s
        self._host = drv.host_alloc(4096)
        self._flag = ctypes.c_uint32.from_address(self._host)
        self._flag.value = 1
        self._dptr = drv.host_device_pointer(self._host)
        self._kernels: dict[int, int] = {}  # context -> function
        self._timer: threading.Timer | None = None
        self.watchdog_fired = False

    # The kernel is loaded lazily, once per context.
    def _kernel_for(self, ctx: int) -> int:
        fn = self._kernels.get(ctx)
        if fn is None:
            module = self.drv.module_load_data(SPIN_PTX)
            fn = self.drv.module_function(module, "gpuhost_spin")
            self._kernels[ctx] = fn
        return fn

    def close_gate(self) -> None:
        """Arm the flag (streams parked from now on wait) and start the watchdog."""
        self.watchdog_fired = False
        self._flag.value = 0
        self._timer = threading.Timer(self.hold_timeout_s, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.watchdog_fired = True
        self._flag.value = 1

    def park(self, ctx: int, stream: int) -> None:
        """Queue the wait on ``stream``, which belongs to context ``ctx``."""
        self.drv.set_current(ctx)  # the kernel is loaded into, and launched from, the stream's context
        if self.method == "kernel":
            fn = self._kernel_for(ctx)
            self.drv.launch_single_thread(fn, stream, [ctypes.c_uint64(self._dptr), ctypes.c_uint64(GPU_TIMEOUT_NS)])
        else:
            self.drv.stream_wait_value32(stream, self._dptr, 1)

    def open(self) -> bool:
        """Release parked streams. False if the watchdog had already done so."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._flag.value = 1
        return not self.watchdog_fired

    def free(self) -> None:
        self.open()
        self.drv.host_free(self._host)


def choose_method(
    drv: CudaDriver, ctx: int, stream: int, wanted: str = "auto", rejected: list[str] | None = None
) -> str:
    """The first hold method that works on this driver, tried on a real stream.

    ``wanted`` is ``auto``, ``kernel`` or ``wait-value``; a named method that fails
    raises :class:`HoldUnavailable` with the driver's error. Why a method was passed
    over is appended to ``rejected``.
    """
    order = list(METHODS) if wanted == "auto" else [wanted]
    errors = []
    for method in order:
        if method == "wait-value" and not drv.has("cuStreamWaitValue32_v2"):
            errors.append("wait-value: libcuda has no cuStreamWaitValue32_v2")
            continue
        gate = StreamGate(drv, method, hold_timeout_s=2.0)
        try:
            gate.close_gate()
            gate.park(ctx, stream)
            gate.open()
            drv.stream_synchronize(stream)
            if rejected is not None:
                rejected.extend(errors)
            return method
        except CudaError as exc:
            errors.append("%s: %s" % (method, exc))
        finally:
            gate.free()
    raise HoldUnavailable("; ".join(errors))
