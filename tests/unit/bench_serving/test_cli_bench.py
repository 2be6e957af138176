"""``gpuhost bench sglang --parse FILE [--json]`` as a user runs it: exit codes 0/1/2 and the JSON document."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from gpuhost.cli.app import _register, app
from tests.unit.bench_serving.corpus import SCHEMA, fixture

_register([])  # every command module, whatever this process was started with
runner = CliRunner()


def _run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["bench", "sglang", *args])


def test_printed_block_parses_with_stable_names() -> None:
    r = _run("--parse", str(fixture("v04-dsv3-h200-qps1-typo.txt")))
    assert r.exit_code == 0, r.output
    assert "output_throughput_tok_s" in r.output and "190.52" in r.output
    assert "max_concurrency                      None" in r.output


def test_json_carries_every_figure_and_validates() -> None:
    r = _run("--parse", str(fixture("v05-glm5-fp8-c100-mtp.txt")), "--json")
    assert r.exit_code == 0
    doc = json.loads(r.output)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    fig = doc["levels"][0]["figures"]
    assert fig["output_throughput_tok_s"] == 1214.97 and fig["total_throughput_tok_s"] == 2435.38
    assert fig["median_ttft_ms"] == 21429.21 and fig["max_concurrency"] == 100
    assert doc["levels"][0]["concurrency"] == 100


def test_jsonl_file_is_one_level_per_line() -> None:
    r = _run("--parse", str(fixture("v04-llama70b-h200-online.jsonl")), "--json")
    assert r.exit_code == 0
    doc = json.loads(r.output)
    assert len(doc["levels"]) == 7 and {lv["source"] for lv in doc["levels"]} == {"jsonl"}


def test_truncated_block_is_partial_but_parsed() -> None:
    r = _run("--parse", str(fixture("v04-dsv3-h200-qps1-truncated.txt")), "--json")
    assert r.exit_code == 0
    assert json.loads(r.output)["levels"][0]["status"] == "partial"


def test_failed_run_exits_1(tmp_path: Path) -> None:
    log = tmp_path / "bench.log"
    log.write_text("Error running benchmark for request rate: inf\n" + "-" * 30 + "\n")
    r = _run("--parse", str(log), "--json")
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert doc["verdict"] == "FAIL" and doc["levels"][0]["status"] == "failed"


def test_not_a_benchmark_or_unreadable_exits_2(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("nothing to see\n")
    assert _run("--parse", str(other)).exit_code == 2
    assert _run("--parse", str(tmp_path / "missing.txt")).exit_code == 2


def test_help_lists_the_parse_and_the_sweep_options() -> None:
    r = _run("--help")
    for option in ("--parse", "--concurrency", "--input-len", "--output-len", "--prompts-per-level", "--baseline"):
        assert option in r.output, option
    assert "--host" not in r.output  # the server is the inventory's launched one, not a free URL


def test_json_output_never_holds_a_secret(tmp_path: Path) -> None:
    line = {
        "backend": "sglang",
        "completed": 2,
        "duration": 1.5,
        "output_throughput": 20.0,
        "server_info": {"api_key": "sk-abcdef123456", "launch_command": "sglang serve --api-key sk-abcdef123456"},
    }
    f = tmp_path / "out.jsonl"
    f.write_text(json.dumps(line) + "\n")
    r = _run("--parse", str(f), "--json")
    assert r.exit_code == 0 and "sk-abcdef123456" not in r.output


def test_parse_draws_the_plot_when_asked(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    # the trap: --parse printed figures and drew nothing
    r = _run("--parse", str(fixture("v05-glm5-fp8-c100-mtp.txt")), "--plot", str(png), "--json")
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
