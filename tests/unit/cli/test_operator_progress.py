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
