"""Tables printed into a pipe (``gpuhost verify p2p > report.txt``): no box drawing, nothing cut to 80 columns."""

from __future__ import annotations

import io
import sys

from rich.table import Table

from gpuhost.cli.output import _LazyConsole
from gpuhost.p2p.tables import PAIR_COLUMNS as COLUMNS


def test_wide_table_in_a_pipe_is_plain_and_whole(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.delenv("COLUMNS", raising=False)
    console = _LazyConsole(stderr=False)
    t = Table(title="pairs", title_justify="left")
    for col in COLUMNS:
        t.add_column(col)
    t.add_row(
        "GPU0-GPU1",
        "NODE",
        "through the CPU root complex",
        "off",
        "14.2",
        "20.1",
        "14.1",
        "25.0",
        "9.8",
        "verdict-FAIL",
        "P2P is off: every copy crosses host memory",
    )
    console.print(t)
    text = out.getvalue()
    assert not any("\u2500" <= c <= "\u257f" for c in text), text
    assert "…" not in text and "\x1b[" not in text
    assert "verdict-FAIL" in text and "P2P is off: every copy crosses host memory" in text
    assert text.splitlines()[1].split() == [
        "pair",
        "link",
        "path",
        "P2P",
        "one-way",
        "GB/s",
        "both",
        "GB/s",
        "lat",
        "us",
        "staged",
        "GB/s",
        "staged",
        "us",
        "verdict",
        "worst",
        "finding",
    ]
