"""Regressions against an earlier run (``--baseline FILE``).

The baseline is anything ``--from-file`` reads: a saved probe report, a previous
``gpuhost verify p2p --json`` output, or a captured tool output. A bandwidth below
``REGRESSION_SHARE`` (90 %) of the baseline's, or a 16-byte latency more than a
quarter (and 0.3 us) above it, is a regression.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuhost.p2p import thresholds as T
from gpuhost.p2p.evidence import Evidence, PathFigures
from gpuhost.p2p.judge import Finding, Level

LATENCY_GROWTH = 1.25
LATENCY_MIN_DELTA_US = 0.3


@dataclass(frozen=True)
class Regression:
    subject: str
    metric: str
    baseline: float
    now: float
    unit: str

    @property
    def message(self) -> str:
        change = (self.now / self.baseline - 1.0) if self.baseline else 0.0
        return f"{self.metric} {self.now:.2f} {self.unit}, baseline {self.baseline:.2f} {self.unit} ({change:+.0%})"

    def to_finding(self) -> Finding:
        return Finding(Level.FAIL, "regression", self.subject, self.message, "regression")

    def to_json(self) -> dict[str, object]:
        return {
            "subject": self.subject,
            "metric": self.metric,
            "baseline": self.baseline,
            "now": self.now,
            "unit": self.unit,
        }


def _bandwidth(out: list[Regression], subject: str, metric: str, now: float | None, base: float | None) -> None:
    if now is not None and base and now < base * T.REGRESSION_SHARE:
        out.append(Regression(subject, metric, base, now, "GB/s"))


def _latency(out: list[Regression], subject: str, metric: str, now: float | None, base: float | None) -> None:
    if now is not None and base and now > base * LATENCY_GROWTH and now - base > LATENCY_MIN_DELTA_US:
        out.append(Regression(subject, metric, base, now, "us"))


def _path(out: list[Regression], subject: str, name: str, now: PathFigures | None, base: PathFigures | None) -> None:
    if now is None or base is None:
        return
    _bandwidth(out, subject, f"{name} one-way", now.uni_gbps, base.uni_gbps)
    _bandwidth(out, subject, f"{name} both-way", now.bidi_gbps, base.bidi_gbps)
    _latency(out, subject, f"{name} 16-byte latency", now.latency_us, base.latency_us)


def compare(now: Evidence, base: Evidence) -> list[Regression]:
    """Every figure present in both that got worse by more than the margins."""
    out: list[Regression] = []
    for g in now.gpus:
        b = base.gpu(g.index)
        if b is None:
            continue
        _bandwidth(out, g.label, "host->GPU", g.h2d_gbps, b.h2d_gbps)
        _bandwidth(out, g.label, "GPU->host", g.d2h_gbps, b.d2h_gbps)
        _bandwidth(out, g.label, "local copy", g.d2d_gbps, b.d2d_gbps)
    for p in now.pairs:
        bp = base.pair(p.src, p.dst)
        if bp is None:
            continue
        _path(out, p.label, "peer", p.p2p, bp.p2p)
        _path(out, p.label, "staged", p.staged, bp.staged)
    return out
