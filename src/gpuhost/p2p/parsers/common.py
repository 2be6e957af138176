"""Helpers shared by the parsers of captured tool output."""

from __future__ import annotations

import re

#: The most GPUs one capture may hold: the NVIDIA driver's own bound, "the maximum number of GPUs supported in a
#: single system" (``NV_MAX_DEVICES 32``, NVIDIA/open-gpu-kernel-modules src/common/sdk/nvidia/inc/nvlimits.h).
#: A matrix past it is no capture of one machine, and judging every pair of thousands of GPUs never ends.
MAX_GPUS = 32
#: The most bytes of one capture file read (an 8-GPU ``nvidia-smi -q`` is ~0.3 MB, every format here far less).
MAX_CAPTURE_BYTES = 8 << 20

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
