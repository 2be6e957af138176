"""NVML queries: integer P2P indexes (nvidia-ml-py 13.6xx's READ constant is a tuple) and tolerant failures."""

from __future__ import annotations

from typing import Any

import pynvml

from gpuhost.probe.nvml_facts import P2P_INDEXES, Nvml


class FakeNvml:
    """Answers like pynvml for two GPUs linked by NVLink; records the P2P index arguments."""

    NVMLError = pynvml.NVMLError

    def __init__(self) -> None:
        self.indexes: list[Any] = []

    def nvmlDeviceGetP2PStatus(self, h1: Any, h2: Any, index: Any) -> int:
        self.indexes.append(index)
        if not isinstance(index, int):
            raise TypeError("Don't know how to convert parameter 3")
        return {4: 5}.get(index, 0)  # PCI path: NOT_SUPPORTED, the rest OK

    def nvmlDeviceGetTopologyCommonAncestor(self, h1: Any, h2: Any) -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)


def _nvml_with(fake: FakeNvml) -> Nvml:
    n = Nvml.__new__(Nvml)
    n.nv = fake
    n.error = None
    return n


def test_the_shipped_pynvml_still_has_the_tuple_bug_we_work_around() -> None:
    # If this starts failing, nvidia-ml-py fixed the constant; the workaround stays harmless.
    assert isinstance(pynvml.NVML_P2P_CAPS_INDEX_READ, (tuple, int))
    assert [i for _, i in P2P_INDEXES] == [0, 1, 2, 3, 4]


def test_pair_status_uses_integer_indexes_and_names_the_codes() -> None:
    fake = FakeNvml()
    pair = _nvml_with(fake).pair("h0", "h1")
    assert all(type(i) is int for i in fake.indexes)
    assert pair["status"] == {"read": "OK", "write": "OK", "nvlink": "OK", "atomics": "OK", "pci": "NS"}


def test_an_unsupported_query_leaves_none_and_the_error() -> None:
    pair = _nvml_with(FakeNvml()).pair("h0", "h1")
    assert pair["topology"] is None
    assert "topology" in pair["nvml_errors"]
