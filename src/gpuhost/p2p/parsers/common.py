"""Helpers shared by the parsers of captured tool output."""

from __future__ import annotations

import re

#: Row index -> the row's values.
Matrix = dict[int, list[float | None]]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    """nvidia-smi underlines headers with ANSI escapes when it writes to a terminal."""
    return _ANSI.sub("", text).replace("\r\n", "\n")


def number(cell: str) -> float | None:
    """A matrix cell as a number; ``N/A`` (no peer access) as None."""
    cell = cell.strip()
    if cell in ("N/A", "n/a", "-"):
        return None
    return float(cell)
