"""Progress read from a command's streamed output: real curl meter captures, installer log phases."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost.core.progress import ByteCount, CurlMeter, LogPhases, ProgressStream, count_line, meter_row
from gpuhost.operations.nvidia import INSTALL_PHASES

CURL = Path(__file__).resolve().parents[2] / "fixtures" / "curl"
HF = Path(__file__).resolve().parents[2] / "fixtures" / "hf"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def feed(stream: ProgressStream, data: bytes, clock: Clock, chunk: int = 7) -> None:
    for i in range(0, len(data), chunk):  # in pieces, as SSH delivers it: rows split across reads
        stream.write(data[i : i + chunk])
        clock.now += 0.01


class Records(list[logging.LogRecord]):
    pass


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> Iterator[Records]:
    caplog.set_level(logging.INFO, logger="gpuhost.progress")
    seen = Records()
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    logger = logging.getLogger("gpuhost.progress")
    logger.addHandler(handler)
    yield seen
    logger.removeHandler(handler)


def lines(records: list[logging.LogRecord]) -> list[tuple[str, bool]]:
    return [(r.getMessage(), bool(getattr(r, "update", False))) for r in records]


def test_rows_of_a_real_rate_limited_download(records):
    clock = Clock()
    stream = ProgressStream("pve1", CurlMeter("driver download"), clock=clock)
    feed(stream, (CURL / "meter-http-limit-rate.txt").read_bytes(), clock)
    kept = stream.close(ok=True)
    seen = lines(records)
    assert seen[0] == ("driver download: started", False)
    assert ("driver download: 9.6 MiB of 11.4 MiB (83%), 4.4 MiB/s", True) in seen
    assert ("driver download: 9.6 MiB of 11.4 MiB (83%), 2.3 MiB/s", True) in seen
    assert seen[-2] == ("driver download: 11.4 MiB of 11.4 MiB (100%), 413.0 KiB/s", True)
    assert seen[-1] == ("driver download: 11.4 MiB downloaded, 2.4 MiB/s average", False)
    assert records[-1].host == "pve1" and records[-1].elapsed == pytest.approx(clock.now - 100.0)
    assert kept == "", "the meter and its header are progress, not output"


def test_a_failed_download_keeps_curls_error_as_output(records):
    stream = ProgressStream("pve1", CurlMeter("driver download"))
    stream.write((CURL / "meter-http-404.txt").read_bytes())
    kept = stream.close(ok=False)
    assert kept == "curl: (22) The requested URL returned error: 404\n"
    assert lines(records)[-1] == ("driver download: stopped after 0 B", False)


def test_a_file_url_download_and_the_meter_row_fields():
    rows = [meter_row(r) for r in (CURL / "meter-file.txt").read_text().replace("\r", "\n").splitlines()]
    got = [r for r in rows if r is not None]
    assert [r.percent for r in got] == [0, 39, 100]
    assert got[-1].total == got[-1].received == 5859 * 1024 and got[-1].average == 1068 * 1024**2
    assert meter_row("  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current") is None


def test_installer_log_phases_each_once_with_elapsed(records):
    clock = Clock()
    stream = ProgressStream("pve1", LogPhases("driver install (DKMS build)", INSTALL_PHASES), clock=clock)
    log = (
        "nvidia-installer log file '/var/log/nvidia-installer.log'\n"
        "-> Kernel source path: '/lib/modules/6.8.12-4-pve/build'\n-> Building kernel modules\n"
    )
    feed(stream, log.encode(), clock)
    clock.now += 40
    feed(stream, b"-> Kernel module compilation complete.\n", clock)
    assert stream.close(ok=True).startswith("nvidia-installer log file")
    seen = [(r.getMessage(), round(r.elapsed)) for r in records]
    assert seen == [
        ("driver install (DKMS build): building the kernel module", 0),
        ("driver install (DKMS build): kernel module built", 40),
        ("driver install (DKMS build): done", 40),
    ]


def test_a_model_download_reports_bytes_and_rate_from_hf_fetch_lines(records):
    """hf_fetch.py's real stdout (tests/fixtures/hf/): its progress lines are progress, its JSON result is output."""
    clock = Clock()
    stream = ProgressStream("llm", ByteCount("model download"), clock=clock)
    data = (HF / "fetch-48mib-shard-16mib-per-s.txt").read_bytes()
    feed(stream, data, clock, chunk=50)
    kept = stream.close(ok=True)
    assert lines(records) == [
        ("model download: started: 48.0 MiB to fetch", False),
        ("model download: 10.0 MiB of 48.0 MiB (20%), 10.0 MiB/s", True),
        ("model download: 20.0 MiB of 48.0 MiB (41%), 10.0 MiB/s", True),
        ("model download: 40.0 MiB of 48.0 MiB (83%), 20.0 MiB/s", True),
        ("model download: 48.0 MiB of 48.0 MiB (100%), 26.7 MiB/s", True),
        ("model download: 48.0 MiB downloaded, 14.5 MiB/s average", False),
    ]
    assert records[-1].host == "llm" and records[-1].elapsed == pytest.approx(clock.now - 100.0)
    assert kept.startswith('{"commit": "f107fa56a1a875a54181e01ef7f784ff81c97c7a"') and kept.count("\n") == 1
    assert count_line("gpuhost-progress done=7 total=9 t=0.5") == (7, 9, 0.5)
    assert count_line('{"gpuhost-progress": 1}') is None


def test_a_model_download_cut_short_says_how_far_it_got(records):
    """The first three lines of the same run, as the runner sees them when the command dies there."""
    stream = ProgressStream("llm", ByteCount("model download"))
    head = b"".join((HF / "fetch-48mib-shard-16mib-per-s.txt").read_bytes().splitlines(keepends=True)[:3])
    stream.write(head)
    assert stream.close(ok=False) == ""
    assert lines(records)[-1] == ("model download: stopped after 20.0 MiB", False)
