"""Progress of long steps (a reboot's phases, a download): records on the ``gpuhost.progress`` logger.

``report(host, step, message, elapsed)`` logs one INFO record with ``host``, ``step``, ``elapsed``;
the command line prints each as a line (``[pve1] reboot: back on SSH (42 s)``) on stderr and keeps it
in ``--log``. Nothing is printed when no handler is attached (the library stays quiet).
"""

from __future__ import annotations

import logging

LOGGER = "gpuhost.progress"
progress_log = logging.getLogger(LOGGER)


def report(host: str, step: str, message: str, elapsed: float | None = None) -> None:
    progress_log.info(
        "%s: %s", step, message, extra={"host": host, "step": step, "elapsed": elapsed, "progress": message}
    )


def format_record(record: logging.LogRecord) -> str:
    host = getattr(record, "host", "?")
    elapsed = getattr(record, "elapsed", None)
    took = f" ({elapsed:.0f} s)" if isinstance(elapsed, int | float) else ""
    return f"[{host}] {record.getMessage()}{took}"
