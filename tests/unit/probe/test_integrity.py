"""The pattern check catches what broken peer paths do: zeros, shifted data, stale data."""

from __future__ import annotations

import ctypes

from gpuhost.probe import integrity

N = 3 * integrity.BLOCK + 123


def _buf() -> ctypes.Array:
    return ctypes.create_string_buffer(N)


def test_a_faithful_copy_passes() -> None:
    a, b = _buf(), _buf()
    integrity.fill_pattern(ctypes.addressof(a), N)
    ctypes.memmove(b, a, N)
    assert integrity.equal(ctypes.addressof(a), ctypes.addressof(b), N)
    assert integrity.first_difference(ctypes.addressof(a), ctypes.addressof(b), N) is None


def test_dropped_writes_leave_zeros_that_are_found() -> None:
    a, b = _buf(), _buf()
    integrity.fill_pattern(ctypes.addressof(a), N)
    ctypes.memmove(b, a, 4096)  # only the first page arrived
    assert not integrity.equal(ctypes.addressof(a), ctypes.addressof(b), N)
    at = integrity.first_difference(ctypes.addressof(b), ctypes.addressof(a), N)
    assert at is not None and 4096 <= at < 4096 + 64
    assert integrity.zero_fraction(ctypes.addressof(b) + 4096, N - 4096) == 1.0


def test_data_shifted_by_a_page_is_not_mistaken_for_a_copy() -> None:
    a, b = _buf(), _buf()
    integrity.fill_pattern(ctypes.addressof(a), N)
    ctypes.memmove(ctypes.addressof(b) + 4096, a, N - 4096)
    assert not integrity.equal(ctypes.addressof(a), ctypes.addressof(b), N)


def test_pattern_is_not_uniform() -> None:
    a = _buf()
    integrity.fill_pattern(ctypes.addressof(a), N)
    assert len(set(a.raw[:4096])) > 200
