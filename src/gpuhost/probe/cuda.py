"""The few CUDA driver API calls the probe needs, bound with ctypes on ``libcuda.so.1``.

Only the driver is assumed: no toolkit, no cuda-bindings. Every call is checked and a
failure raises :class:`CudaError` naming the call and the driver's error name.
ctypes releases the GIL during foreign calls, so a watchdog thread can run while
the main thread waits inside the driver.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

# Device attributes (cuda.h, CUdevice_attribute).
ATTR_MULTIPROCESSOR_COUNT = 16
ATTR_PCI_BUS_ID = 33
ATTR_PCI_DEVICE_ID = 34
ATTR_UNIFIED_ADDRESSING = 41
ATTR_PCI_DOMAIN_ID = 50
ATTR_COMPUTE_CAPABILITY_MAJOR = 75
ATTR_COMPUTE_CAPABILITY_MINOR = 76

# Peer attributes (CUdevice_P2PAttribute).
P2P_PERFORMANCE_RANK = 1
P2P_ACCESS_SUPPORTED = 2
P2P_NATIVE_ATOMIC_SUPPORTED = 3

# Flags.
STREAM_NON_BLOCKING = 0x1
EVENT_DEFAULT = 0x0
MEMHOSTALLOC_PORTABLE = 0x1
MEMHOSTALLOC_DEVICEMAP = 0x2
STREAM_WAIT_VALUE_GEQ = 0x0

# Results the probe treats specially.
SUCCESS = 0
ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
ERROR_PEER_ACCESS_NOT_ENABLED = 705

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_uint64_p = ctypes.POINTER(ctypes.c_uint64)
_c_void_pp = ctypes.POINTER(ctypes.c_void_p)
_size_t = ctypes.c_size_t
_vp = ctypes.c_void_p
_u64 = ctypes.c_uint64
_uint = ctypes.c_uint

# name -> argument types. Versioned names are the ones cuda.h maps the plain names to.
_SIGNATURES: dict[str, tuple[Any, ...]] = {
    "cuInit": (_uint,),
    "cuDriverGetVersion": (_c_int_p,),
    "cuDeviceGetCount": (_c_int_p,),
    "cuDeviceGet": (_c_int_p, ctypes.c_int),
    "cuDeviceGetName": (ctypes.c_char_p, ctypes.c_int, ctypes.c_int),
    "cuDeviceGetAttribute": (_c_int_p, ctypes.c_int, ctypes.c_int),
    "cuDeviceTotalMem_v2": (ctypes.POINTER(_size_t), ctypes.c_int),
    "cuDevicePrimaryCtxRetain": (_c_void_pp, ctypes.c_int),
    "cuDevicePrimaryCtxRelease_v2": (ctypes.c_int,),
    "cuCtxSetCurrent": (_vp,),
    "cuCtxSynchronize": (),
    "cuDeviceCanAccessPeer": (_c_int_p, ctypes.c_int, ctypes.c_int),
    "cuDeviceGetP2PAttribute": (_c_int_p, ctypes.c_int, ctypes.c_int, ctypes.c_int),
    "cuCtxEnablePeerAccess": (_vp, _uint),
    "cuCtxDisablePeerAccess": (_vp,),
    "cuMemAlloc_v2": (_c_uint64_p, _size_t),
    "cuMemFree_v2": (_u64,),
    "cuMemHostAlloc": (_c_void_pp, _size_t, _uint),
    "cuMemFreeHost": (_vp,),
    "cuMemHostGetDevicePointer_v2": (_c_uint64_p, _vp, _uint),
    "cuMemsetD8_v2": (_u64, ctypes.c_ubyte, _size_t),
    "cuMemcpyHtoD_v2": (_u64, _vp, _size_t),
    "cuMemcpyDtoH_v2": (_vp, _u64, _size_t),
    "cuMemcpyHtoDAsync_v2": (_u64, _vp, _size_t, _vp),
    "cuMemcpyDtoHAsync_v2": (_vp, _u64, _size_t, _vp),
    "cuMemcpyDtoDAsync_v2": (_u64, _u64, _size_t, _vp),
    "cuMemcpyPeerAsync": (_u64, _vp, _u64, _vp, _size_t, _vp),
    "cuStreamCreate": (_c_void_pp, _uint),
    "cuStreamDestroy_v2": (_vp,),
    "cuStreamSynchronize": (_vp,),
    "cuStreamWaitEvent": (_vp, _vp, _uint),
    "cuStreamWaitValue32_v2": (_vp, _u64, ctypes.c_uint32, _uint),
    "cuEventCreate": (_c_void_pp, _uint),
    "cuEventRecord": (_vp, _vp),
    "cuEventSynchronize": (_vp,),
    "cuEventElapsedTime": (ctypes.POINTER(ctypes.c_float), _vp, _vp),
    "cuEventDestroy_v2": (_vp,),
    "cuModuleLoadData": (_c_void_pp, ctypes.c_char_p),
    "cuModuleGetFunction": (_c_void_pp, _vp, ctypes.c_char_p),
    "cuLaunchKernel": (_vp, _uint, _uint, _uint, _uint, _uint, _uint, _uint, _vp, _c_void_pp, _c_void_pp),
    "cuGetErrorName": (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)),
    "cuGetErrorString": (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)),
}


class CudaError(RuntimeError):
    """A driver call failed. ``code`` is the CUresult, ``name`` its symbolic name."""

    def __init__(self, call: str, code: int, name: str, text: str) -> None:
        self.call = call
        self.code = code
        self.name = name
        self.text = text
        super().__init__("%s failed: %s (%d): %s" % (call, name, code, text))


class CudaUnavailable(RuntimeError):
    """libcuda.so.1 cannot be loaded, or lacks a symbol the probe needs."""


class CudaDriver:
    """A loaded ``libcuda.so.1``. Methods return Python values and raise on error."""

    def __init__(self, library: str = "libcuda.so.1") -> None:
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as exc:
            raise CudaUnavailable("cannot load %s: %s" % (library, exc)) from exc
        self._fns: dict[str, Callable[..., int]] = {}
        self.missing: list[str] = []
        for name, argtypes in _SIGNATURES.items():
            try:
                fn = getattr(self._lib, name)
            except AttributeError:
                self.missing.append(name)
                continue
            fn.argtypes = list(argtypes)
            fn.restype = ctypes.c_int
            self._fns[name] = fn
        required = [n for n in self.missing if n not in ("cuStreamWaitValue32_v2",)]
        if required:
            raise CudaUnavailable(
                "%s lacks %s: not a working NVIDIA driver (the P2P probe needs a real GPU and its driver;"
                " an old driver or a stand-in library lacks these)" % (library, ", ".join(required))
            )

    def has(self, name: str) -> bool:
        return name in self._fns

    # -- error handling ---------------------------------------------------------------
    def error_name(self, code: int) -> tuple[str, str]:
        name = ctypes.c_char_p()
        text = ctypes.c_char_p()
        n = "CUDA_ERROR_%d" % code
        t = ""
        if self._fns["cuGetErrorName"](code, ctypes.byref(name)) == SUCCESS and name.value:
            n = name.value.decode(errors="replace")
        if self._fns["cuGetErrorString"](code, ctypes.byref(text)) == SUCCESS and text.value:
            t = text.value.decode(errors="replace")
        return n, t

    def call(self, name: str, *args: Any, ok: tuple[int, ...] = (SUCCESS,)) -> int:
        code = self._fns[name](*args)
        if code not in ok:
            err_name, text = self.error_name(code)
            raise CudaError(name, code, err_name, text)
        return code

    # -- initialisation and devices -----------------------------------------------------
    def init(self) -> None:
        self.call("cuInit", 0)

    def driver_version(self) -> int:
        v = ctypes.c_int()
        self.call("cuDriverGetVersion", ctypes.byref(v))
        return v.value

    def device_count(self) -> int:
        n = ctypes.c_int()
        self.call("cuDeviceGetCount", ctypes.byref(n))
        return n.value

    def device(self, ordinal: int) -> int:
        d = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(d), ordinal)
        return d.value

    def device_name(self, dev: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", buf, 256, dev)
        return buf.value.decode(errors="replace")

    def attribute(self, dev: int, attr: int) -> int:
        v = ctypes.c_int()
        self.call("cuDeviceGetAttribute", ctypes.byref(v), attr, dev)
        return v.value

    def total_mem(self, dev: int) -> int:
        v = _size_t()
        self.call("cuDeviceTotalMem_v2", ctypes.byref(v), dev)
        return v.value

    def bus_id(self, dev: int) -> str:
        """The PCI address in NVML's form, e.g. ``00000000:1B:00.0``."""
        return "%08X:%02X:%02X.0" % (
            self.attribute(dev, ATTR_PCI_DOMAIN_ID),
            self.attribute(dev, ATTR_PCI_BUS_ID),
            self.attribute(dev, ATTR_PCI_DEVICE_ID),
        )

    def primary_context(self, dev: int) -> int:
        ctx = _vp()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        return ctx.value or 0

    def release_primary_context(self, dev: int) -> None:
        self.call("cuDevicePrimaryCtxRelease_v2", dev)

    def set_current(self, ctx: int) -> None:
        self.call("cuCtxSetCurrent", _vp(ctx))

    def synchronize(self) -> None:
        self.call("cuCtxSynchronize")

    # -- peers ------------------------------------------------------------------------
    def can_access_peer(self, dev: int, peer: int) -> bool:
        v = ctypes.c_int()
        self.call("cuDeviceCanAccessPeer", ctypes.byref(v), dev, peer)
        return bool(v.value)

    def p2p_attribute(self, attr: int, src: int, dst: int) -> int:
        v = ctypes.c_int()
        self.call("cuDeviceGetP2PAttribute", ctypes.byref(v), attr, src, dst)
        return v.value

    def enable_peer_access(self, peer_ctx: int) -> None:
        """Let the current context reach ``peer_ctx``'s memory; already enabled is fine."""
        self.call("cuCtxEnablePeerAccess", _vp(peer_ctx), 0, ok=(SUCCESS, ERROR_PEER_ACCESS_ALREADY_ENABLED))

    def disable_peer_access(self, peer_ctx: int) -> None:
        self.call("cuCtxDisablePeerAccess", _vp(peer_ctx), ok=(SUCCESS, ERROR_PEER_ACCESS_NOT_ENABLED))

    # -- memory -----------------------------------------------------------------------
    def mem_alloc(self, nbytes: int) -> int:
        p = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(p), nbytes)
        return p.value

    def mem_free(self, ptr: int) -> None:
        self.call("cuMemFree_v2", ptr)

    def host_alloc(self, nbytes: int) -> int:
        """Pinned, portable (every context), device-mapped host memory."""
        p = _vp()
        self.call("cuMemHostAlloc", ctypes.byref(p), nbytes, MEMHOSTALLOC_PORTABLE | MEMHOSTALLOC_DEVICEMAP)
        return p.value or 0

    def host_free(self, ptr: int) -> None:
        self.call("cuMemFreeHost", _vp(ptr))

    def host_device_pointer(self, host_ptr: int) -> int:
        p = ctypes.c_uint64()
        self.call("cuMemHostGetDevicePointer_v2", ctypes.byref(p), _vp(host_ptr), 0)
        return p.value

    def memset_d8(self, dptr: int, value: int, nbytes: int) -> None:
        self.call("cuMemsetD8_v2", dptr, value, nbytes)

    def copy_htod(self, dst: int, src_host: int, nbytes: int) -> None:
        self.call("cuMemcpyHtoD_v2", dst, _vp(src_host), nbytes)

    def copy_dtoh(self, dst_host: int, src: int, nbytes: int) -> None:
        self.call("cuMemcpyDtoH_v2", _vp(dst_host), src, nbytes)

    def copy_htod_async(self, dst: int, src_host: int, nbytes: int, stream: int) -> None:
        self.call("cuMemcpyHtoDAsync_v2", dst, _vp(src_host), nbytes, _vp(stream))

    def copy_dtoh_async(self, dst_host: int, src: int, nbytes: int, stream: int) -> None:
        self.call("cuMemcpyDtoHAsync_v2", _vp(dst_host), src, nbytes, _vp(stream))

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self.call("cuMemcpyDtoDAsync_v2", dst, src, nbytes, _vp(stream))

    def copy_peer_async(self, dst: int, dst_ctx: int, src: int, src_ctx: int, nbytes: int, stream: int) -> None:
        self.call("cuMemcpyPeerAsync", dst, _vp(dst_ctx), src, _vp(src_ctx), nbytes, _vp(stream))

    # -- streams, events, kernels -------------------------------------------------------
    def stream_create(self) -> int:
        s = _vp()
        self.call("cuStreamCreate", ctypes.byref(s), STREAM_NON_BLOCKING)
        return s.value or 0

    def stream_destroy(self, stream: int) -> None:
        self.call("cuStreamDestroy_v2", _vp(stream))

    def stream_synchronize(self, stream: int) -> None:
        self.call("cuStreamSynchronize", _vp(stream))

    def stream_wait_event(self, stream: int, event: int) -> None:
        self.call("cuStreamWaitEvent", _vp(stream), _vp(event), 0)

    def stream_wait_value32(self, stream: int, dptr: int, value: int) -> None:
        self.call("cuStreamWaitValue32_v2", _vp(stream), dptr, value, STREAM_WAIT_VALUE_GEQ)

    def event_create(self) -> int:
        e = _vp()
        self.call("cuEventCreate", ctypes.byref(e), EVENT_DEFAULT)
        return e.value or 0

    def event_record(self, event: int, stream: int) -> None:
        self.call("cuEventRecord", _vp(event), _vp(stream))

    def event_synchronize(self, event: int) -> None:
        self.call("cuEventSynchronize", _vp(event))

    def event_elapsed_ms(self, start: int, end: int) -> float:
        ms = ctypes.c_float()
        self.call("cuEventElapsedTime", ctypes.byref(ms), _vp(start), _vp(end))
        return float(ms.value)

    def event_destroy(self, event: int) -> None:
        self.call("cuEventDestroy_v2", _vp(event))

    def module_load_data(self, image: bytes) -> int:
        m = _vp()
        self.call("cuModuleLoadData", ctypes.byref(m), image)
        return m.value or 0

    def module_function(self, module: int, name: str) -> int:
        f = _vp()
        self.call("cuModuleGetFunction", ctypes.byref(f), _vp(module), name.encode())
        return f.value or 0

    def launch_single_thread(self, function: int, stream: int, args: list[Any]) -> None:
        """Launch ``function`` as one block of one thread; ``args`` are ctypes values."""
        params = (_vp * len(args))(*[ctypes.cast(ctypes.pointer(a), _vp) for a in args])
        self.call(
            "cuLaunchKernel", _vp(function), 1, 1, 1, 1, 1, 1, 0, _vp(stream), ctypes.cast(params, _c_void_pp), None
        )


def load_driver(library: str | None = None) -> CudaDriver:
    """Load and initialise the driver; raises :class:`CudaUnavailable` or :class:`CudaError`."""
    drv = CudaDriver(library or "libcuda.so.1")
    drv.init()
    return drv
