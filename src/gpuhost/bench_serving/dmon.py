"""A saved ``nvidia-smi dmon`` capture, read as GPU samples (the keys the bench's own sampler writes).

dmon prints two header lines, the metric names and their units (``# gpu pwr gtemp … / # Idx W C …``), then one
row per GPU per interval; it prints the header again now and then, and ``-`` where a metric is not supported.
The columns depend on ``-s`` (``p`` power/temperature, ``u`` utilisation, ``c`` clocks, ``m`` frame buffer, ``t``
PCIe throughput, …) and on the driver: 2016 drivers print ``temp`` where later ones print ``gtemp`` and
``mtemp``. Only the header says which column is which, so the header is required. ``-o D``/``-o T`` captures
(``#Date``/``Time`` columns in front) are refused with a message saying so: no public capture of them was found to
test a reader on.

Mapping onto the sampler's keys (:data:`gpuhost.bench_serving.samples.SAMPLE_KEYS`): ``pwr`` (W) → power_w,
``gtemp``/``temp`` (C) → temp_c, ``sm`` (%) → util_gpu_pct, ``mem`` (%) → util_mem_pct, ``pclk`` (MHz, the
graphics clock) → sm_clock_mhz, ``mclk`` (MHz) → mem_clock_mhz, ``fb`` (MB, nvidia-smi's MiB) → mem_used_mib,
``rxpci``/``txpci`` (MB/s) → pcie_rx_kib_s/pcie_tx_kib_s (x 1024). dmon reports no power limit, so a dmon
capture gives no share of the limit.

Pasted captures keep their markdown: a ``> `` quote prefix and a ``\\#`` escape are read through, and so is the
``^C`` a terminal echoes in front of the last row when dmon is stopped, and a prompt line before the header.
"""

from __future__ import annotations

import re

from gpuhost.bench_serving.samples import SampleSeries, Tick

BACKEND = "nvidia-smi dmon"

_COLUMNS: dict[str, tuple[str, float]] = {
    "pwr": ("power_w", 1.0),
    "gtemp": ("temp_c", 1.0),
    "temp": ("temp_c", 1.0),
    "sm": ("util_gpu_pct", 1.0),
    "mem": ("util_mem_pct", 1.0),
    "pclk": ("sm_clock_mhz", 1.0),
    "mclk": ("mem_clock_mhz", 1.0),
    "fb": ("mem_used_mib", 1.0),
    "rxpci": ("pcie_rx_kib_s", 1024.0),
    "txpci": ("pcie_tx_kib_s", 1024.0),
}
_QUOTE = re.compile(r"^(?:>\s?)+")
_CTRL_C = re.compile(r"^\^C")  # the terminal's echo of the Ctrl-C that ended dmon, glued to the next row
_HEADER = re.compile(r"^\\?#\s*(.*)$")


class NotDmonOutput(ValueError):
    """The text holds no ``nvidia-smi dmon`` header and rows; the message says what was missing."""


def _clean(line: str) -> str:
    return _CTRL_C.sub("", _QUOTE.sub("", line.rstrip("\r\n"))).rstrip()


def _number(cell: str) -> float | None:
    if cell == "-":
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def read_dmon(text: str, source: str = "input") -> SampleSeries:
    """The GPU samples of a dmon capture: one tick per interval (a GPU index seen again starts the next one).

    Lines before the first header (a prompt) are passed over; a row that does not fit the header (cut by the
    paste) is left out and counted in ``bad_lines``, named in ``notes`` with its line. Raises
    :class:`NotDmonOutput` (naming ``source``) when no header is followed by a row."""
    series = SampleSeries(backend=BACKEND)
    names: list[str] | None = None
    current: list[dict[str, float | int | None]] = []
    rows = 0

    def close() -> None:  # dmon's rows carry no time: a tick's clock is its place in the capture
        nonlocal current
        if current:
            series.ticks.append(Tick(float(len(series.ticks)), float(len(series.ticks)), tuple(current)))
            current = []

    for number, raw in enumerate(text.splitlines(), start=1):
        line = _clean(raw)
        if not line.strip():
            continue
        head = _HEADER.match(line.strip())
        if head:
            words = [w.lower() for w in head.group(1).split()]
            if words and words[0] in ("date", "time") and "gpu" in words and "pid" not in words:
                raise NotDmonOutput(f"{source}:{number}: a dmon capture with -o D/-o T time columns is not read")
            if words and words[0] == "gpu" and "pid" not in words:
                names = words  # "pid" is nvidia-smi pmon's header, not dmon's
            continue  # the units line, or a header printed again
        if names is None:
            continue  # a prompt or a line before the capture
        cells = line.split()
        row = dict(zip(names, cells, strict=False))
        index = _number(row.get("gpu", "-"))
        if len(cells) != len(names) or index is None:
            series.bad_lines += 1  # a row cut by the paste, or a line that is not a row: left out, counted
            series.notes.append(
                f"{source}:{number}: {len(cells)} cells where the header names {len(names)} ({' '.join(names)})"
                if len(cells) != len(names)
                else f"{source}:{number}: GPU index {row.get('gpu')!r} is not a number"
            )
            continue
        if any(int(g["index"] or 0) == int(index) for g in current):
            close()
        sample: dict[str, float | int | None] = {"index": int(index)}
        for name, (key, scale) in _COLUMNS.items():
            if name in row and key not in sample:
                value = _number(row[name])
                sample[key] = None if value is None else round(value * scale, 3)
        current.append(sample)
        rows += 1
    close()
    if names is None or rows == 0:
        raise NotDmonOutput(f"{source}: no nvidia-smi dmon header ('# gpu …') followed by rows")
    series.gpus = [{"index": i} for i in sorted({int(g["index"]) for t in series.ticks for g in t.gpus})]
    return series
