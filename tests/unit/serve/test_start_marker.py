"""Only this start's journal lines count: a crash (or ready) line of an earlier start never does.

The log lines are real captures (tests/fixtures/sglang/logs, see SOURCE.md); the marker lines are gpuhost's own
(what templates/sglang-launch.sh.j2 prints first at every start)."""

from __future__ import annotations

from pathlib import Path

from gpuhost.facts import serve_layout as target
from gpuhost.serve.logscan import scan_text

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"
OLD, NEW = "a" * 32, "0123456789abcdef" * 2


def marker(token: str) -> str:
    return f"gpuhost-sglang: start {token} profile=glm5-nvfp4-tp8-sm120 argv-sha256={'f' * 64}"


def journal(*parts: str) -> str:
    return "\n".join(p.rstrip("\n") for p in parts) + "\n"


CRASHED = (LOGS / "sglang-2468-warmup-failed.log").read_text()
HEALTHY = (LOGS / "sglang-19712-dsv32-running.log").read_text()


def test_a_crash_of_the_earlier_start_does_not_count():
    text = journal(marker(OLD), CRASHED, marker(NEW), HEALTHY)
    assert scan_text(text).fatal  # unfiltered, the earlier start's warm-up failure would fail this start
    lines = target.lines_of_start(text, NEW)
    assert lines is not None and lines == HEALTHY.rstrip("\n").splitlines()
    assert not scan_text("\n".join(lines)).fatal


def test_a_restart_by_systemd_keeps_the_first_attempts_crash():
    text = journal(marker(NEW), CRASHED, marker(NEW), HEALTHY)
    scanner = scan_text("\n".join(target.lines_of_start(text, NEW) or []))
    assert "warmup-failed" in {h.signature for h in scanner.report() if h.fatal}


def test_no_marker_yet_and_foreign_tokens():
    assert target.lines_of_start(journal(marker(OLD), CRASHED), NEW) is None
    assert target.lines_of_start(journal(marker(NEW + "ff"), HEALTHY), NEW) is None  # a longer token is another
    assert target.lines_of_start(journal(marker(NEW)), "not-a-token") is None
    assert target.lines_of_start(journal(marker(NEW)), NEW) == []


def test_probe_url_reaches_a_wildcard_listener_on_loopback():
    assert target.probe_url("0.0.0.0", 30000) == "http://127.0.0.1:30000"
    assert target.probe_url("127.77.9.1", 8000) == "http://127.77.9.1:8000"
    assert target.probe_url("::1", 30000) == "http://[::1]:30000"
