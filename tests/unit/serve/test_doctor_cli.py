from pathlib import Path

from typer.testing import CliRunner

from gpuhost.cli.app import _register, app

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"
_register([])  # every command module, whatever this process was started with
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


def test_a_journal_of_two_starts_is_read_from_the_last_start():
    # the trap: `journalctl -u gpuhost-sglang` holds every start; an earlier start's crash was reported for a
    # server that started again cleanly. The marker lines are what templates/sglang-launch.sh.j2 prints.
    crashed = (LOGS / "sglang-19408-glm-moe-dsa-keyerror.log").read_text()
    running = (LOGS / "sglang-19712-dsv32-running.log").read_text()
    marker = "gpuhost-sglang: start {} profile=glm5 argv-sha256=" + "0" * 64 + "\n"
    journal = marker.format("a" * 32) + crashed + marker.format("b" * 32) + running
    r = runner.invoke(app, ["doctor", "sglang-log", "-"], input=journal)
    assert r.exit_code == 0, r.output
    first = len(crashed.splitlines()) + 2
    assert f"read from line {first}: the last of 2 starts (--all-starts reads every one)" in r.output
    assert "transformers-model-type" not in r.output
    every = runner.invoke(app, ["doctor", "sglang-log", "--all-starts", "-"], input=journal)
    assert every.exit_code == 1 and "FAIL sglang.log.transformers-model-type" in every.output
    assert "8 | [2026-02-26 15:56:59] ERROR: KeyError: 'glm_moe_dsa'" in every.output  # line numbers of the input
