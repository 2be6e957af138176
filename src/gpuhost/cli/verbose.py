"""``-v/--verbose``: one line per remote command, from records on the ``gpuhost.remote`` logger.

The connection layer logs one record per command it ran::

    logger.debug("%s", command, extra={"host": name, "command": command, "exit_code": rc, "duration": seconds})

and :class:`RemoteCommandHandler` prints it as ``[pve1] 0.012s rc=0 $ pveversion`` on stderr, redacted.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from gpuhost.redact import redact

LOGGER = "gpuhost.remote"


def format_record(record: logging.LogRecord) -> str:
    host = getattr(record, "host", None) or "?"
    command = getattr(record, "command", None)
    if command is None:
        command = record.getMessage()
    rc = getattr(record, "exit_code", None)
    duration = getattr(record, "duration", None)
    took = f"{duration:.3f}s" if isinstance(duration, int | float) else "-"
    lines = redact(str(command)).splitlines() or [""]
    shown = lines[0] + (f" … (+{len(lines) - 1} lines)" if len(lines) > 1 else "")
    return f"[{host}] {took} rc={'-' if rc is None else rc} $ {shown}"


class RemoteCommandHandler(logging.Handler):
    """Writes each ``gpuhost.remote`` record as one line."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(logging.DEBUG)
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self.stream or sys.stderr
            stream.write(format_record(record) + "\n")
            stream.flush()
        except Exception:  # a broken stream must not break the run
            self.handleError(record)


def enable(stream: TextIO | None = None) -> RemoteCommandHandler:
    """Attach a handler to ``gpuhost.remote`` and let its debug records through; returns the handler."""
    logger = logging.getLogger(LOGGER)
    for h in list(logger.handlers):
        if isinstance(h, RemoteCommandHandler):
            logger.removeHandler(h)
    handler = RemoteCommandHandler(stream)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return handler


def disable() -> None:
    logger = logging.getLogger(LOGGER)
    for h in list(logger.handlers):
        if isinstance(h, RemoteCommandHandler):
            logger.removeHandler(h)
    logger.setLevel(logging.NOTSET)
