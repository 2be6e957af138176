from pathlib import Path

from typer.testing import CliRunner

from gpuhost.cli.app import _register, app

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"
_register()
runner = CliRunner()


def test_fatal_log_exits_1_with_cause_fix_and_lines():
    r = runner.invoke(app, ["doctor", "sglang-log", str(LOGS / "sglang-19408-glm-moe-dsa-keyerror.log")])
    assert r.exit_code == 1, r.output
    assert "FAIL sglang.log.transformers-model-type" in r.output
    assert "cause: the installed Transformers is older" in r.output and "fix:" in r.output
    assert "7 | [2026-02-26 15:56:59] ERROR: KeyError: 'glm_moe_dsa'" in r.output
    assert "python-traceback" not in r.output  # explained by the fatal signature


def test_healthy_log_exits_0():
    r = runner.invoke(app, ["doctor", "sglang-log", str(LOGS / "sglang-19712-dsv32-running.log")])
    assert r.exit_code == 0 and "no known signature found" in r.output


def test_stdin_and_phase_line():
    text = (LOGS / "sglang-1751-capture-begin-traceback.log").read_text()
    r = runner.invoke(app, ["doctor", "sglang-log", "-"], input=text)
    assert r.exit_code == 0
    assert "start-up reached: graph capture (a CUDA graph capture began and did not end)" in r.output


def test_unreadable_input_exits_2(tmp_path: Path):
    r = runner.invoke(app, ["doctor", "sglang-log", str(tmp_path / "missing.log")])
    assert r.exit_code == 2 and "cannot read" in r.output


def test_json_output():
    import json

    r = runner.invoke(app, ["doctor", "sglang-log", "--json", str(LOGS / "sglang-5285-capture-oom.log")])
    assert r.exit_code == 1
    data = json.loads(r.output)
    assert data["schema"] == "gpuhost.doctor-sglang-log/1" and data["fatal"] is True
    checks = {f["check"] for f in data["findings"]}
    assert "sglang.log.cuda-oom" in checks and data["findings"][0]["lines"][0]["line"] >= 1
