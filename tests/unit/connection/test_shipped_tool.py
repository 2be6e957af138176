"""run_tool on the local connection (and through a stand-in pct): ship, run, parse, always clean up."""

import json
import stat
import sys
import time
from pathlib import Path

import pytest

from gpuhost.connection.local import LocalConnection
from gpuhost.connection.shipped_tool import ToolFailed, run_inline, run_tool, start_tool

FAKE_PCT = """#!/bin/sh
echo "$@" >> "$FAKE_PCT_LOG"
case "$1" in
  push) cp "$3" "$4" && chmod "${6:-644}" "$4" ;;
  pull) cp "$3" "$4" ;;
  exec) shift 3; exec "$@" ;;
esac
"""

TOOL = b"""
import json, sys
mode = sys.argv[1]
if mode == "json":
    print(json.dumps({"args": sys.argv[2:], "cwd_has_tool": True}))
elif mode == "jsonl":
    for i in range(3):
        print(json.dumps({"sample": i}))
elif mode == "garbage":
    print("not json"); print("detail on stderr", file=sys.stderr)
elif mode == "fail":
    print("half a report"); print("boom", file=sys.stderr); sys.exit(5)
elif mode == "sleep":
    import time; time.sleep(30)
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    work = tmp_path / "tmp"
    work.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} -I "$@"\n')
    (bindir / "pct").write_text(FAKE_PCT)
    for f in bindir.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setenv("TMPDIR", str(work))
    monkeypatch.setenv("FAKE_PCT_LOG", str(tmp_path / "pct.log"))
    return work


def test_json_and_arguments_pass_through_quoted(env):
    out = run_tool(LocalConnection(), TOOL, ["json", "a b", "$(touch pwned)"], name="t.py")
    assert out.data == {"args": ["a b", "$(touch pwned)"], "cwd_has_tool": True}
    assert list(env.iterdir()) == []
    assert not Path("pwned").exists()


def test_json_lines(env):
    assert run_tool(LocalConnection(), TOOL, ["jsonl"], output="jsonl").data == [{"sample": i} for i in range(3)]


def test_not_json_names_command_and_tail(env):
    with pytest.raises(ToolFailed) as info:
        run_tool(LocalConnection("n1"), TOOL, ["garbage"], name="t.py")
    msg = str(info.value)
    assert "printed no valid JSON" in msg and "python3" in msg and "not json" in msg and "n1" in msg
    assert list(env.iterdir()) == []


def test_failure_carries_exit_code_and_output_tail(env):
    with pytest.raises(ToolFailed) as info:
        run_tool(LocalConnection(), TOOL, ["fail"])
    assert info.value.exit_code_of_command == 5 and "boom" in info.value.stderr_tail
    assert "half a report" in info.value.stdout_tail
    assert list(env.iterdir()) == []


def test_timeout_is_a_clear_error_and_cleans_up(env):
    with pytest.raises(ToolFailed, match="timed out after 0.5 s"):
        run_tool(LocalConnection(), TOOL, ["sleep"], timeout=0.5)
    assert list(env.iterdir()) == []


def test_container_target_goes_through_pct_push(env, tmp_path):
    out = run_tool(LocalConnection("node1"), TOOL, ["json", "x"], ctid=105)
    assert out.data["args"] == ["x"]
    calls = (tmp_path / "pct.log").read_text().splitlines()
    assert any(c.startswith("push 105 ") and "--perms 0600" in c for c in calls)
    assert list(env.iterdir()) == []


def test_missing_python3_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolFailed, match="python3 is not installed"):
        run_tool(LocalConnection(), TOOL, ["json"])


BACKGROUND = b"""
import json, signal, sys, time
stop = []
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, lambda *_: None)
else:
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
n = 0
while not stop:
    print(json.dumps({"tick": n}), flush=True)
    n += 1
    time.sleep(0.05)
print(json.dumps({"end": "signal", "ticks": n}), flush=True)
"""


def test_background_tool_runs_until_stopped_then_output_comes_back_and_nothing_is_left(env):
    tool = start_tool(LocalConnection(), BACKGROUND, ["polite"], name="bg.py")
    # it ticks every 50 ms once its interpreter is up (which takes seconds on a loaded machine): wait for 3 ticks
    deadline = time.monotonic() + 20
    # (the wait looks at the local file itself: read_output's checksummed read of a file the tool is writing to
    # every 50 ms can see it change between the read and the checksum)
    while '{"tick": 2}' not in Path(tool._out).read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tool.running()
    so_far = tool.read_output()
    assert '{"tick": 0}' in so_far and '{"tick": 2}' in so_far, so_far
    out = tool.stop()
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["end"] == "signal" and lines[-1]["ticks"] >= 3
    assert not tool.running()
    assert list(env.iterdir()) == []  # its directory is gone
    assert tool.stop() == out  # a second stop is harmless


FLOOD = b"""
import sys, time
line = "x" * 200 + "\\n"
for _ in range(60_000):  # a line every 0.2 ms for about 12 s (12 MB at most)
    sys.stdout.write(line)
    sys.stdout.flush()
    time.sleep(0.0002)
"""


def test_output_of_a_tool_writing_without_pause_reads_whole_every_time(env):
    """read_output while the tool writes as fast as it can: every read succeeds and is whole lines (the read is of
    a copy, so its checksum matches; a checksummed read of the live file fails here within a few tries)."""
    tool = start_tool(LocalConnection(), FLOOD, [], name="flood.py")
    try:
        deadline = time.monotonic() + 20
        while Path(tool._out).stat().st_size < 20_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        sizes = []
        for _ in range(5):
            text = tool.read_output()
            whole = text[: text.rfind("\n") + 1]
            assert set(whole.splitlines()) == {"x" * 200}
            sizes.append(len(text))
        assert sizes[-1] > sizes[0]  # it was growing all the while
    finally:
        tool.stop(grace=1.0)
    assert list(env.iterdir()) == []


def test_background_tool_that_ignores_sigterm_is_killed_after_the_grace(env):
    tool = start_tool(LocalConnection(), BACKGROUND, ["stubborn"], name="bg.py")
    deadline = time.monotonic() + 20
    while '"tick"' not in Path(tool._out).read_text() and time.monotonic() < deadline:  # its SIGTERM handler is set
        time.sleep(0.05)
    started = time.monotonic()
    out = tool.stop(grace=1.0)
    assert 0.9 <= time.monotonic() - started < 10
    assert '"tick"' in out and '"end"' not in out
    assert not tool.running() and list(env.iterdir()) == []


def test_inline_tool_runs_in_one_command_in_the_container_and_leaves_nothing(env, tmp_path):
    """The serve probe (with the module it imports inlined) against a port nothing listens on: one command,
    through pct exec, its JSON parsed; nothing copied into the container, nothing left in TMPDIR."""
    conn = LocalConnection("node1")
    out = run_inline(conn, "serve_probe.py", ["http://127.0.0.1:1", "health", "--timeout", "1"], ctid=105)
    assert out.data["health"] is None and "Connection refused" in out.data["error"]
    calls = (tmp_path / "pct.log").read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("exec 105 -- sh -c ")
    assert list(env.iterdir()) == []


def test_inline_tool_failures_name_the_program_not_its_source(env, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolFailed, match="python3 is not installed") as info:
        run_inline(LocalConnection(), "serve_probe.py", ["http://127.0.0.1:1", "health"])
    assert "base64" not in str(info.value) and "serve_probe.py" in str(info.value)
