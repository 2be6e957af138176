"""The pair loop of the probe, with a stand-in bench: what is measured, enabled and disabled, in order."""

from __future__ import annotations

from typing import Any

from gpuhost.probe.cuda import CudaError
from gpuhost.probe.measure import Settings
from gpuhost.probe.report import Probe


class FakeNvml:
    ok = False


class FakeBench:
    def __init__(self, n: int, can: bool, enable_fails: bool = False) -> None:
        self.gpus = {k: object() for k in range(n)}
        self.can = can
        self.enable_fails = enable_fails
        self.calls: list[tuple[Any, ...]] = []
        self.peer_on: set[tuple[int, int]] = set()

    def peer_capability(self, i: int, j: int) -> dict[str, Any]:
        return {"can_access_peer": self.can}

    def set_peer_access(self, i: int, j: int, enabled: bool) -> None:
        self.calls.append(("peer", i, j, enabled))
        if enabled and self.enable_fails:
            raise CudaError("cuCtxEnablePeerAccess", 711, "CUDA_ERROR_TOO_MANY_PEERS", "too many peers")
        (self.peer_on.add if enabled else self.peer_on.discard)((min(i, j), max(i, j)))

    def copies(self, i: int, j: int, staged: bool = False) -> dict[str, Any]:
        peer = (min(i, j), max(i, j)) in self.peer_on
        assert peer != staged, "staged copies must run with peer access off, peer copies with it on"
        self.calls.append(("copies", i, j, "staged" if staged else "peer"))
        return {"uni": {"value": 1.0}}


def _run(bench: FakeBench) -> Probe:
    probe = Probe(Settings(), nccl="off")
    probe.log = lambda message: None  # type: ignore[method-assign]
    probe._measure_pairs(bench, FakeNvml(), {})  # type: ignore[arg-type]
    return probe


def test_without_peer_access_only_the_staged_path_is_measured() -> None:
    bench = FakeBench(3, can=False)
    probe = _run(bench)
    pairs = probe.report["pairs"]
    assert len(pairs) == 6
    assert all(p["p2p"] is None and "no peer access" in p["p2p_skipped"] for p in pairs)
    assert all("staged" in p for p in pairs)
    assert not any(c[0] == "peer" for c in bench.calls)


def test_with_peer_access_each_pair_is_enabled_measured_both_ways_then_disabled() -> None:
    bench = FakeBench(2, can=True)
    probe = _run(bench)
    assert bench.calls == [
        ("copies", 0, 1, "staged"),
        ("copies", 1, 0, "staged"),
        ("peer", 0, 1, True),
        ("copies", 0, 1, "peer"),
        ("copies", 1, 0, "peer"),
        ("peer", 0, 1, False),
    ]
    assert all(p["p2p"] == {"uni": {"value": 1.0}} for p in probe.report["pairs"])
    assert bench.peer_on == set()


def test_a_failed_enable_is_reported_and_the_run_goes_on() -> None:
    bench = FakeBench(3, can=True, enable_fails=True)
    probe = _run(bench)
    assert all("TOO_MANY_PEERS" in p["p2p_skipped"] for p in probe.report["pairs"])
    assert [e["stage"] for e in probe.report["errors"]] == ["enable peer access"] * 3
