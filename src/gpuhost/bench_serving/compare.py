"""A run against a baseline run: each figure's change per level, and a regression verdict.

Thresholds (stated, and recorded in the comparison itself):

- throughput (output, total, requests/s) falling by more than 5 % is a regression;
- latency (median and P99 TTFT, TPOT, ITL, median E2E) rising by more than 10 % is a regression;
- fewer successful requests is a regression;
- the opposite moves beyond the same thresholds are improvements; anything smaller is noise.

Levels are matched by concurrency (else by label).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

THROUGHPUT_DROP_PCT = 5.0
LATENCY_RISE_PCT = 10.0

HIGHER_IS_BETTER = (
    "output_throughput_tok_s",
    "total_throughput_tok_s",
    "request_throughput_req_s",
    "successful_requests",
)
LOWER_IS_BETTER = (
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_e2e_latency_ms",
)
INFORMATIONAL = ("power_mean_w", "power_pct_of_limit", "util_mean_pct")


@dataclass(frozen=True)
class Change:
    level: str
    figure: str
    baseline: float
    current: float
    change_pct: float
    judgement: str  # "regression" | "improvement" | "same" | "info"

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "figure": self.figure,
            "baseline": self.baseline,
            "current": self.current,
            "change_pct": self.change_pct,
            "judgement": self.judgement,
        }


def _key(level: dict[str, Any]) -> str:
    return f"c{level['concurrency']}" if level.get("concurrency") is not None else str(level["label"])


def _value(level: dict[str, Any], name: str) -> float | None:
    v = level["gpu_summary"].get(name) if name in INFORMATIONAL else level["figures"].get(name)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def judge(figure: str, baseline: float, current: float) -> tuple[float, str]:
    """The change in percent of the baseline and its judgement under the thresholds above (pure)."""
    if baseline == 0:
        pct = 0.0 if current == 0 else float("inf")
    else:
        pct = 100.0 * (current - baseline) / abs(baseline)
    if figure in INFORMATIONAL:
        return pct, "info"
    if figure == "successful_requests":
        return pct, "regression" if current < baseline else ("improvement" if current > baseline else "same")
    if figure in HIGHER_IS_BETTER:
        return pct, "regression" if pct < -THROUGHPUT_DROP_PCT else (
            "improvement" if pct > THROUGHPUT_DROP_PCT else "same"
        )
    return pct, "regression" if pct > LATENCY_RISE_PCT else ("improvement" if pct < -LATENCY_RISE_PCT else "same")


def compare(current: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """The comparison object that goes into the document under ``comparison`` (pure)."""
    base = {_key(lv): lv for lv in baseline["levels"]}
    changes: list[Change] = []
    unmatched: list[str] = []
    for lv in current["levels"]:
        key = _key(lv)
        ref = base.get(key)
        if ref is None:
            unmatched.append(key)
            continue
        for name in HIGHER_IS_BETTER + LOWER_IS_BETTER + INFORMATIONAL:
            b, c = _value(ref, name), _value(lv, name)
            if b is None or c is None:
                continue
            pct, verdict = judge(name, b, c)
            changes.append(Change(key, name, b, c, round(pct, 2) if pct != float("inf") else 1e9, verdict))
    regressions = [c for c in changes if c.judgement == "regression"]
    verdict = (
        "regression"
        if regressions
        else ("improvement" if any(c.judgement == "improvement" for c in changes) else "no-change")
    )
    return {
        "verdict": verdict,
        "thresholds": {"throughput_drop_pct": THROUGHPUT_DROP_PCT, "latency_rise_pct": LATENCY_RISE_PCT},
        "baseline_created": baseline.get("created"),
        "changes": [c.to_json() for c in changes],
        "regressions": [c.to_json() for c in regressions],
        "unmatched_levels": unmatched,
    }
