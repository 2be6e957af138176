"""Per-level aggregation over the real H200 capture, the JSON document against its schema, the table, the PNG."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from gpuhost.bench_serving.findings import all_findings
from gpuhost.bench_serving.parse import parse_output
from gpuhost.bench_serving.results import LevelRun, build_document, render_table, summarise, write_run_dir
from gpuhost.bench_serving.samples import gpu_stats, read_samples, window
from tests.unit.bench_serving import seeds
from tests.unit.bench_serving.corpus import SCHEMA, fixture, text


def _phases() -> dict[str, float]:
    return json.loads(text("h200-sampler-idle-load.phases.json"))


@pytest.mark.parametrize("name", ["h200-sampler-idle-load.jsonl", "h200-sampler-idle-load-smi.jsonl"])
def test_h200_idle_vs_sustained_matmul(name: str) -> None:
    """Real H200 (one GPU, 700 W limit): ~10 s idle, then 20 s of bf16 8192^3 matmuls."""
    s = read_samples(text(name))
    ph = _phases()
    assert s.interval_ms == 500 and s.bad_lines == 0
    [idle] = gpu_stats(window(s, ph["idle_start"], ph["idle_end"]))
    [load] = gpu_stats(window(s, ph["load_start"], ph["load_end"]))
    assert idle.samples >= 18 and load.samples >= 38  # >= 2 Hz
    assert idle.power_limit_w == load.power_limit_w == 700.0
    assert idle.power_mean_w is not None and load.power_mean_w is not None
    assert idle.power_mean_w < 100 and load.power_mean_w > 600  # 78.7 W -> ~670 W
    assert idle.util_gpu_mean_pct == 0 and load.util_gpu_mean_pct is not None and load.util_gpu_mean_pct > 90
    assert idle.sm_clock_mean_mhz == 345 and load.sm_clock_mean_mhz is not None and load.sm_clock_mean_mhz > 1300
    assert load.power_pct_of_limit is not None and load.power_pct_of_limit > 90


def _doc(tmp_path: Path | None = None) -> dict:
    ph = _phases()
    # Real H200 samples; the benchmark figures come from two corpus blocks. The pairing is the test's own.
    levels = [
        LevelRun(1, parse_output(text("v05-glm5-fp8-c1-mtp.txt"))[0], ph["idle_start"], ph["idle_end"]),
        LevelRun(100, parse_output(text("v05-glm5-fp8-c100-mtp.txt"))[0], ph["load_start"], ph["load_end"]),
    ]
    s = read_samples(text("h200-sampler-idle-load.jsonl"))
    summaries = summarise(levels, s)
    return build_document(summaries, all_findings(summaries), samples=s, target="h200", created="2026-12-01T00:00Z")


def test_document_validates_against_the_schema() -> None:
    doc = _doc()
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert doc["levels"][1]["gpu_summary"]["power_pct_of_limit"] > 90
    json.dumps(doc, allow_nan=False)


def test_schema_lists_every_stable_field() -> None:
    from gpuhost.bench_serving.parse import FIELD_UNITS

    props = json.loads(SCHEMA.read_text())["properties"]["levels"]["items"]["properties"]["figures"]["properties"]
    assert set(FIELD_UNITS) <= set(props)


def test_table_shows_throughput_latency_and_watts() -> None:
    table = render_table(_doc())
    head = table.splitlines()[0]
    for col in ("out tok/s", "TTFT p50", "TPOT p99", "ITL p99", "W mean", "% limit", "util %"):
        assert col in head
    assert "GPU0: 670.7 W of 700 W" in table


def test_run_dir_has_json_table_and_a_real_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    paths = write_run_dir(tmp_path / "run", _doc())
    png = paths["plot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    jsonschema.validate(json.loads(paths["json"].read_text()), json.loads(SCHEMA.read_text()))
    assert "W mean" in paths["table"].read_text()


def test_seeds_plot_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from gpuhost.bench_serving.plot import plot_sweep

    summaries = summarise(seeds.levels(), seeds.samples())
    doc = build_document(summaries, all_findings(summaries), samples=seeds.samples())
    out = plot_sweep(doc, tmp_path / "seeds.png")
    assert out.stat().st_size > 20_000


def test_windows_ignore_samples_outside_and_apply_clock_offset() -> None:
    s = seeds.samples()
    assert len(window(s, 1000.0, 1300.0)) == 600
    assert window(s, 1000.0, 1300.0, offset_s=5000.0) == []
    [lv] = summarise([LevelRun(8, parse_output(text("v05-glm5-fp8-c1-mtp.txt"))[0], 0.0, 10.0)], s)
    assert lv.gpus == []


def test_fixture_paths_exist() -> None:
    assert fixture("SOURCE.md").exists()


def test_plot_names_the_run_has_a_latency_panel_and_no_legend_over_data() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from gpuhost.bench_serving.plot import sweep_figure

    fig = sweep_figure(_doc())
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert fig._suptitle.get_text() == "gpuhost bench sglang: h200 · 2026-12-01 00:00 UTC · " + _doc()["verdict"]
    throughput, latency, power = fig.axes[:3]
    labels = [ln.get_label() for ln in latency.get_lines()]
    assert labels[:2] == ["TTFT p50", "TTFT p99"] and "TPOT p50" in labels and "ITL p99" in labels
    # the c100 block of the corpus waits 21 s for a first token and 37 ms a token: both readable on one panel
    assert latency.get_yscale() == "log"
    for ax in (throughput, latency, power):
        legend = ax.get_legend().get_window_extent(renderer)
        for line in ax.get_lines():
            for x, y in line.get_xydata():
                px, py = ax.transData.transform((x, y))
                assert not legend.contains(px, py), f"{ax.get_title()}: the legend covers {line.get_label()}"
    plt.close(fig)
