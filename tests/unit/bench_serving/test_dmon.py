"""``nvidia-smi dmon`` captures read as GPU samples, and shown with a saved benchmark result (issue 30).

Real captures: tests/fixtures/host/nvidia-smi-dmon (sources in tests/fixtures/host/SOURCE.md). The expected figures
are a reading of each capture's own columns."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from gpuhost.bench_serving.dmon import NotDmonOutput, read_dmon
from gpuhost.bench_serving.samples import gpu_stats
from gpuhost.cli.app import _register, app
from tests.unit.bench_serving.corpus import SCHEMA, fixture

_register()
DMON = Path(__file__).resolve().parents[2] / "fixtures" / "host" / "nvidia-smi-dmon"
PRO6000 = DMON / "rtx-pro-6000-maxq-4gpu-pucm-sglang-load.txt"
DEEPSPEECH = DMON / "deepspeech-178-4gpu-pucvmet-2016-quoted.txt"
LAB2 = DMON / "lab2-1gpu-idle-25-intervals-ctrl-c.txt"
PMON = DMON / "rtx-pro-6000-maxq-pmon-not-dmon.txt"


def _stats(path: Path):
    series = read_dmon(path.read_text(), path.name)
    return series, {g.index: g for g in gpu_stats(series.ticks)}


def test_four_blackwell_gpus_under_sglang_load_draw_nearly_300_w_each():
    # 595.91 driver, -s pucm: pwr, gtemp, mtemp '-', sm, mem, …, mclk, pclk, fb, bar1, ccpm (trailing spaces)
    series, g = _stats(PRO6000)
    assert series.backend == "nvidia-smi dmon" and len(series.ticks) == 1
    assert [g[i].power_mean_w for i in range(4)] == [294.0, 292.0, 299.0, 299.0]
    assert [g[i].util_gpu_mean_pct for i in range(4)] == [98.0, 99.0, 100.0, 100.0]
    assert [g[i].sm_clock_mean_mhz for i in range(4)] == [1897.0, 2017.0, 1192.0, 1200.0]  # pclk
    assert g[0].mem_used_max_mib == 90538.0 and g[3].mem_used_max_mib == 48209.0  # fb
    assert g[0].power_limit_w is None and g[0].power_pct_of_limit is None  # dmon prints no limit


def test_a_2016_capture_quoted_in_an_issue_is_read_through_its_markdown():
    # "> \# gpu   pwr  temp …": a quote prefix, an escaped '#', the old single 'temp', '-' for sbecc/dbecc
    series, g = _stats(DEEPSPEECH)
    assert len(series.ticks) == 1 and sorted(g) == [0, 1, 2, 3]
    assert g[3].power_mean_w == 86.0 and g[3].util_gpu_mean_pct == 18.0 and g[3].util_mem_mean_pct == 6.0
    assert g[3].pcie_rx_mean_kib_s == 62 * 1024 and g[3].pcie_tx_mean_kib_s == 5 * 1024  # rxpci/txpci MB/s
    assert g[1].mem_used_max_mib == 11653.0 and g[0].mem_clock_mean_mhz == 4513.0


def test_an_idle_gpu_over_25_intervals_with_the_ctrl_c_echo_on_the_last_row():
    series, g = _stats(LAB2)
    assert len(series.ticks) == 25  # the prompt line is passed over; "^C    0     31 …" is the 25th row
    assert g[0].samples == 25 and g[0].power_mean_w == 31.0 and g[0].util_gpu_mean_pct == 0.0
    assert g[0].sm_clock_mean_mhz == 210.0 and g[0].mem_clock_mean_mhz == 405.0


def test_pmon_and_a_benchmark_block_are_not_dmon():
    with pytest.raises(NotDmonOutput, match=r"^rtx-pro-6000-maxq-pmon-not-dmon.txt: no nvidia-smi dmon header"):
        read_dmon(PMON.read_text(), PMON.name)
    with pytest.raises(NotDmonOutput, match="no nvidia-smi dmon header"):
        read_dmon(fixture("v05-glm5-fp8-c1-mtp.txt").read_text(), "bench.txt")


def test_a_row_cut_by_the_paste_is_left_out_and_named_with_its_line():
    text = PRO6000.read_text().splitlines(keepends=True)
    cut = "".join(text[:3]) + text[3][:40] + "\n"  # the capture cut inside its second row
    series = read_dmon(cut, "cap")
    assert [g["index"] for t in series.ticks for g in t.gpus] == [0]
    assert series.bad_lines == 1 and series.notes[0].startswith("cap:4: 6 cells where the header names 15 (gpu pwr")


def _bench(*args: str):
    return CliRunner().invoke(app, ["bench", "sglang", *args])


def test_cli_shows_the_gpus_of_a_saved_run_with_its_result():
    r = _bench("--parse", str(fixture("v05-glm5-fp8-c1-mtp.txt")), "--gpu-samples", str(LAB2), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert doc["sampler"]["backend"] == "nvidia-smi dmon" and doc["sampler"]["ticks"] == 25
    (gpu,) = doc["levels"][0]["gpus"]
    assert (gpu["index"], gpu["samples"], gpu["power_mean_w"], gpu["util_gpu_mean_pct"]) == (0, 25, 31.0, 0.0)
    text = _bench("--parse", str(fixture("v05-glm5-fp8-c1-mtp.txt")), "--gpu-samples", str(PRO6000))
    assert text.exit_code == 0 and "run1 GPU2: 299.0 W" in text.output


def test_cli_reads_the_samplers_own_jsonl_too():
    samples = fixture("h200-sampler-idle-load.jsonl")
    r = _bench("--parse", str(fixture("v05-glm5-fp8-c1-mtp.txt")), "--gpu-samples", str(samples), "--json")
    assert r.exit_code == 0, r.output
    (gpu,) = json.loads(r.output)["levels"][0]["gpus"]
    assert gpu["power_limit_w"] == 700.0


def test_cli_refuses_what_it_cannot_pair_with_exit_2_naming_the_file():
    bad = _bench("--parse", str(fixture("v05-glm5-fp8-c1-mtp.txt")), "--gpu-samples", str(PMON))
    assert bad.exit_code == 2 and "rtx-pro-6000-maxq-pmon-not-dmon.txt: no nvidia-smi dmon header" in bad.output
    many = _bench("--parse", str(fixture("v04-llama70b-h200-online.jsonl")), "--gpu-samples", str(LAB2))
    assert many.exit_code == 2 and "GPU samples go with one benchmark result; the output holds 7" in many.output
    alone = _bench("--gpu-samples", str(LAB2))
    assert alone.exit_code == 2 and "--gpu-samples goes with --parse" in alone.output
