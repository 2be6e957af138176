"""Every real result block and JSONL line of the corpus: each figure parsed equals the one in the file."""

from __future__ import annotations

import json
import math

import pytest

from gpuhost.bench_serving.parse import FIELD_UNITS, JSONL_KEYS, _printed_name, _slug, parse_output
from tests.unit.bench_serving.corpus import JSONL, PRINTED, text


def test_corpus_has_at_least_eight_real_blocks() -> None:
    blocks = len(PRINTED) + sum(len(text(n).splitlines()) for n in JSONL)
    assert len(PRINTED) >= 8 and blocks >= 10


#: labels of a derivative's block that are no SGLang figure (the reader keeps them under ``extra``), by hand
NOT_FIGURES = {
    "vllm-omni-minicpmo45-seedtts-910c-zero-tpot-itl.txt": {
        "Failed requests",
        "Total audio duration generated(s)",
        "Total audio frames generated",
        "Audio throughput(audio duration/s)",
        "Streaming continuity OK rate",
        *(f"{s} AUDIO_{m}{u}" for s in ("Mean", "Median", "P99") for m, u in (("TTFP", " (ms)"), ("RTF", ""))),
    },
}


def _file_figures(raw: str, not_figures: frozenset[str] | set[str] = frozenset()) -> dict[str, str]:
    """label: value lines of the file, mapped independently of the parser's value conversion."""
    out: dict[str, str] = {}
    section = None
    for line in raw.splitlines()[1:]:
        if line.startswith("-") and line.endswith("-"):
            section = line.strip("-").strip().lower()
            continue
        if ":" not in line:
            continue
        label, value = line.split(":", 1)
        if label.strip() in not_figures:
            continue
        name = _printed_name(label.strip(), section)
        assert name is not None, f"unmapped label {label!r}"
        out.setdefault(name, value.strip())
    return out


@pytest.mark.parametrize("name", PRINTED)
def test_each_printed_figure_matches_the_file(name: str) -> None:
    raw = text(name)
    [result] = parse_output(raw)
    expected = _file_figures(raw, NOT_FIGURES.get(name, set()))
    assert set(result.figures) == set(expected)
    for label in NOT_FIGURES.get(name, set()):
        assert _slug(label) in result.extra, label
    for key, value in expected.items():
        got = result.figures[key]
        if value in ("not set",):
            assert got is None
        elif value == "inf":
            assert got == "inf"
        elif key == "backend":
            assert got == value
        else:
            assert got == pytest.approx(float(value)), key
        assert key in FIELD_UNITS


EXPECTED = {
    # file: (status, output tok/s, total tok/s, median TTFT, P99 ITL, max concurrency, request rate)
    "pre04-dlora-rate2.txt": ("ok", 825.94, 2121.89, 606.88, 0.0, None, 2.0),
    "v04-dsv3-h200-qps1-typo.txt": ("ok", 190.52, 491.05, 297.76, 239.92, None, 1.0),
    "v04-dsv3-h200-qps1-truncated.txt": ("partial", 190.86, 491.92, 280.56, 218.08, None, 1.0),
    "v04-dsv3-h200-qps8-typo.txt": ("ok", 561.02, 1445.99, 755.54, 1724.48, None, 8.0),
    "v05-r1distill-rate20-c64.txt": ("ok", 628.38, 1627.34, 5789.71, None, 64, 20.0),
    "v05-glm5-fp8-c1-mtp.txt": ("ok", 117.96, 288.50, 282.34, 26.99, 1, "inf"),
    "v05-glm5-fp8-c100-mtp.txt": ("ok", 1214.97, 2435.38, 21429.21, 164.88, 100, "inf"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_headline_figures_by_hand(name: str) -> None:
    status, out, total, ttft, p99_itl, conc, rate = EXPECTED[name]
    [r] = parse_output(text(name))
    assert r.status == status
    assert r.figures["output_throughput_tok_s"] == out
    assert r.figures["total_throughput_tok_s"] == total
    assert r.figures["median_ttft_ms"] == ttft
    if p99_itl is not None:
        assert r.figures["p99_itl_ms"] == p99_itl
    assert r.figures.get("max_concurrency") == conc
    assert r.figures["request_rate"] == rate


def test_version_differences_are_visible() -> None:
    old = parse_output(text("pre04-dlora-rate2.txt"))[0].figures
    assert "max_concurrency" not in old and "concurrency" not in old  # no concurrency lines yet
    new = parse_output(text("v05-glm5-fp8-c100-mtp.txt"))[0].figures
    assert new["accept_length"] == 3.5 and new["peak_concurrent_requests"] == 105
    assert new["p90_e2e_latency_ms"] == 57009.82 and "p95_ttft_ms" not in new  # 0.5.9/0.5.12 percentile set
    vision = parse_output(text("v05-r1distill-rate20-c64.txt"))[0].figures
    assert vision["total_input_vision_tokens"] == 0 and vision["peak_output_throughput_tok_s"] == 1236.0


def test_truncated_block_is_partial_and_says_why() -> None:
    [r] = parse_output(text("v04-dsv3-h200-qps1-truncated.txt"))
    assert r.status == "partial" and any("closing" in n for n in r.notes)
    assert r.figures["max_itl_ms"] == 1447.12


@pytest.mark.parametrize("name", JSONL)
def test_each_jsonl_figure_matches_the_line(name: str) -> None:
    lines = [json.loads(line) for line in text(name).splitlines() if line.strip()]
    results = parse_output(text(name))
    assert len(results) == len(lines)
    for obj, r in zip(lines, results, strict=False):
        assert r.source == "jsonl" and r.status == "ok"
        for key, value in obj.items():
            stable = JSONL_KEYS.get(key, key)
            if isinstance(value, float) and math.isinf(value):
                assert r.figures[stable] == "inf"
            else:
                assert r.figures[stable] == value, key


def test_jsonl_infinity_request_rate_and_names() -> None:
    [r] = parse_output(text("v04-deepseek-dp-mla.jsonl"))
    assert r.figures["request_rate"] == "inf"
    assert r.figures["output_throughput_tok_s"] == pytest.approx(12412.394674113431)
    assert r.figures["successful_requests"] == 10000
    assert r.figures["duration_s"] == pytest.approx(412.49091206211597)
