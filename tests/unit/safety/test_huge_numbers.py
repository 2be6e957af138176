"""Huge numbers in a bench JSONL (``1e400``, an integer of 5,000 digits) are read without a crash or a hang:
the figure is missing with a note saying why (issue 31, item 8: "huge numbers in a bench JSONL" were
``internal error``). The lines are the first record of a real capture (tests/fixtures/sglang/bench, its
SOURCE.md) with one figure replaced."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuhost.bench_serving.samples import read_samples
from gpuhost.cli.app import _register, app
from tests.unit.bench_serving.corpus import fixture

_register([])
runner = CliRunner()
CAPTURE = fixture("v04-llama70b-h200-online.jsonl").read_text().splitlines()[0]


@pytest.mark.parametrize(
    ("figure", "number"),
    [("output_throughput", "1e400"), ("completed", "1" + "0" * 5000), ("duration", "-" + "9" * 100_000 + ".5")],
    ids=["1e400", "10**5000", "100k-digit-float"],
)
def test_a_huge_number_is_a_missing_figure_with_a_note(tmp_path: Path, figure: str, number: str) -> None:
    original = json.loads(CAPTURE)[figure]
    line = CAPTURE.replace(f'"{figure}": {original}', f'"{figure}": {number}', 1)
    assert line != CAPTURE
    path = tmp_path / "bench.jsonl"
    path.write_text(line + "\n")
    start = time.monotonic()
    r = runner.invoke(app, ["bench", "sglang", "--parse", str(path), "--json"])
    assert time.monotonic() - start < 10
    assert r.exit_code in (0, 1), r.output  # 1: the level is failed (no request count), never 70
    assert "internal error" not in r.output
    level = json.loads(r.stdout)["levels"][0]
    assert any(f"{figure}: not a finite number" in n for n in level["notes"]), level["notes"]
    assert "median_ttft_ms" in level["figures"] and level["figures"]["median_ttft_ms"] == pytest.approx(85.745, 1e-3)


def test_a_baseline_with_a_huge_integer_is_read(tmp_path: Path) -> None:
    """--baseline reads a result.json: a 5,000-digit integer in it is read, not refused as 'not JSON'."""
    from gpuhost.bench_serving.results import SCHEMA
    from gpuhost.cli.bench import _load_baseline

    path = tmp_path / "result.json"
    path.write_text(f'{{"schema": "{SCHEMA}", "levels": [{{"concurrency": 1' + "0" * 5000 + "}]}")
    doc = _load_baseline(path)
    assert doc["levels"][0]["concurrency"] == float("inf")


def test_a_sampler_line_with_a_huge_number_is_counted_bad_not_fatal() -> None:
    good = '{"type": "sample", "t_wall": 1.5, "t_mono": 2.5, "gpus": []}'
    series = read_samples(f'{good}\n{{"type": "sample", "t_wall": 1{"0" * 5000}, "t_mono": 1e400, "gpus": []}}\n')
    assert series.bad_lines == 1
    assert [(t.t_wall, t.t_mono) for t in series.ticks] == [(1.5, 2.5)]
