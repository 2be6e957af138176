"""Progress while waiting: a plain line per step, a repeated ``still`` line in logs, a live line on a TTY."""

from __future__ import annotations

import io
import time

from gpuhost.cli.progress import ProgressLines
from gpuhost.core.progress import report


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_piped_progress_repeats_the_step_until_it_ends():
    out = io.StringIO()
    with ProgressLines(stream=out, every=1.0) as progress:
        report("pve1", "reboot", "down; waiting for SSH", 0.0)
        time.sleep(2.5)
        progress.done("pve1")
        seen = out.getvalue().splitlines()
        time.sleep(1.5)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[pve1] reboot: down; waiting for SSH (0 s)"
    assert lines[1].startswith("[pve1] still: reboot: down; waiting for SSH (") and lines[1].endswith(" s)")
    assert lines == seen, "a finished step kept printing"
    assert "\x1b" not in out.getvalue()


def test_terminal_gets_a_live_line_wiped_before_other_output():
    out = Tty()
    with ProgressLines(stream=out) as progress:
        report("pve2", "reboot", "back on SSH; systemd starting", 41.0)
        time.sleep(1.2)
        assert "\r\x1b[K… pve2: reboot: back on SSH; systemd starting 1 s" in out.getvalue()
        progress.done("pve2")
    assert out.getvalue().endswith("\r\x1b[K")
    assert out.getvalue().startswith("[pve2] reboot: back on SSH; systemd starting (41 s)\n")


def test_a_task_without_progress_of_its_own_gets_still_lines_in_a_log_and_a_live_line_on_a_terminal():
    from gpuhost.core.progress import task_started

    # the trap: the SGLang venv install (pip, gigabytes) was silent until it ended
    out = io.StringIO()
    with ProgressLines(stream=out, every=1.0) as progress:
        task_started("pve1", "CT 200: SGLang venv")
        time.sleep(2.5)
        progress.done("pve1")
    lines = out.getvalue().splitlines()
    assert lines, "nothing in the log while the task ran"
    assert all(ln.startswith("[pve1] still: CT 200: SGLang venv: running (") for ln in lines), lines
    tty = Tty()
    with ProgressLines(stream=tty) as progress:
        task_started("pve2", "CT 200: SGLang venv")
        time.sleep(1.2)
        assert "\r\x1b[K… pve2: CT 200: SGLang venv: running 1 s" in tty.getvalue()
        report("pve2", "download", "12 MiB", 3.0)  # the task's own progress takes the line over
        progress.done("pve2")
    assert "[pve2] download: 12 MiB (3 s)" in tty.getvalue()
    assert "SGLang venv: running\n" not in tty.getvalue(), "the start is not a line of its own"


def test_every_log_line_has_its_date_and_time():
    import re
    import tempfile
    from pathlib import Path

    from gpuhost.cli.runlog import RunLog

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.log"
        with RunLog(path) as log, ProgressLines(log, stream=io.StringIO(), every=1.0):
            log.line("two\nlines")
            report("pve1", "reboot", "down", 1.0)
        lines = path.read_text().splitlines()
    assert len(lines) == 5  # the header's two, the two lines, the progress line
    for line in lines:
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ", line), line
    assert lines[2].endswith(" two") and lines[3].endswith(" lines") and lines[4].endswith("[pve1] reboot: down (1 s)")
