"""Keep secrets out of every message, log line, report and exception.

A secret is registered once, when it is read (see :mod:`gpuhost.secrets`);
from then on :func:`redact` masks it wherever gpuhost builds text for a human or a file.
"""

from __future__ import annotations

import threading

MASK = "********"
_MIN_LEN = 4

_lock = threading.Lock()
_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember ``value`` so that it is masked from now on. Short values are ignored."""
    if not value or len(value) < _MIN_LEN:
        return
    with _lock:
        _secrets.add(value)
        # A PVE token is ``user@realm!name=uuid``: the uuid alone is secret too.
        if "=" in value:
            tail = value.rsplit("=", 1)[1]
            if len(tail) >= _MIN_LEN:
                _secrets.add(tail)


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by :data:`MASK`."""
    if not text:
        return text
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for s in secrets:
        if s in text:
            text = text.replace(s, MASK)
    return text


def forget_all() -> None:
    """Drop every registered secret (for tests)."""
    with _lock:
        _secrets.clear()
