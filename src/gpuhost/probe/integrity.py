"""The byte pattern copies carry, and the check that a destination holds it.

The pattern is random bytes in a block of prime length, tiled over the buffer, so
a copy that lands at the wrong offset, a write that never arrives (IOMMU faults
leave zeros) or a stale buffer cannot pass. Destinations are zeroed before each
measured batch, so what the check finds was written by that batch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

#: Length of the random block the pattern repeats (a prime, so it never aligns with pages).
BLOCK = 1048573

_libc: ctypes.CDLL | None = None


def _memcmp() -> Callable[[int, int, int], int]:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        _libc.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        _libc.memcmp.restype = ctypes.c_int
    memcmp: Callable[[int, int, int], int] = _libc.memcmp
    return memcmp


def fill_pattern(host_ptr: int, nbytes: int, seed_block: bytes | None = None) -> None:
    """Write the tiled random pattern into ``nbytes`` of host memory at ``host_ptr``."""
    block = seed_block if seed_block is not None else os.urandom(BLOCK)
    offset = 0
    while offset < nbytes:
        n = min(len(block), nbytes - offset)
        ctypes.memmove(host_ptr + offset, block, n)
        offset += n


def equal(a_ptr: int, b_ptr: int, nbytes: int) -> bool:
    return _memcmp()(a_ptr, b_ptr, nbytes) == 0


def first_difference(a_ptr: int, b_ptr: int, nbytes: int, chunk: int = 1 << 20) -> int | None:
    """Offset of the first differing byte, or ``None`` when equal."""
    cmp = _memcmp()
    offset = 0
    while offset < nbytes:
        n = min(chunk, nbytes - offset)
        if cmp(a_ptr + offset, b_ptr + offset, n) != 0:
            a = ctypes.string_at(a_ptr + offset, n)
            b = ctypes.string_at(b_ptr + offset, n)
            for k in range(n):
                if a[k] != b[k]:
                    return offset + k
        offset += n
    return None


def zero_fraction(ptr: int, nbytes: int, sample: int = 1 << 20) -> float:
    """Share of zero bytes in the first ``sample`` bytes: dropped writes leave zeros."""
    n = min(sample, nbytes)
    data = ctypes.string_at(ptr, n)
    return data.count(0) / float(n) if n else 0.0
