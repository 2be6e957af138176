"""Keep secrets out of every message, log line, report and exception.

A secret is registered once, when it is read (see :mod:`gpuhost.secrets`);
from then on :func:`redact` masks it wherever gpuhost builds text for a human or a file.
Keys gpuhost never read are masked too where text shows them as keys: ``--api-key KEY`` in a launch command,
``api_key='KEY'`` in SGLang's ``server_args`` line (a dataclass repr, or a dict's from 0.5.12), ``*_API_KEY=``,
``*_TOKEN=`` environment lines, ``Authorization: Bearer``; a key found so is registered, so its other
appearances are masked as well.

:func:`printable` makes text from outside (logs, captures, remote output) safe for a terminal: control
characters other than newline and tab are shown escaped (``\\x1b``), never sent raw.
"""

from __future__ import annotations

import re
import threading

MASK = "********"
_MIN_LEN = 4
#: a key found by a pattern is registered (masked everywhere after) when it is at least this long
_LEARN_LEN = 8

_lock = threading.Lock()
_secrets: set[str] = set()

#: (pattern, group of the value, words): each pattern's other groups are kept; ``words`` (lower case) are those one
#: of which a text must hold for the pattern to match, so a pattern whose words are all missing is not run (most
#: texts show no key, and each pattern scans the whole text)
_KEY_PATTERNS: tuple[tuple[re.Pattern[str], int, tuple[str, ...]], ...] = (
    # --api-key KEY, --api-key=KEY, --admin-api-key 'KEY' (not a "$VARIABLE" reference); the quote may be
    # JSON-escaped (\"KEY\" in a report's text): a backslash is never part of the key
    (re.compile(r"(--(?:admin-)?api-key(?:=|[ \t]+))((?:\\?['\"])?)(?!\$)([^\s'\"\\]+)"), 3, ("api-key",)),
    (re.compile(r"(--hf-token(?:=|[ \t]+))((?:\\?['\"])?)(?!\$)([^\s'\"\\]+)"), 3, ("hf-token",)),
    # ServerArgs(... api_key='KEY' ...), {'api_key': 'KEY'}, "api_key": "KEY"
    (re.compile(r"(\b(?:admin_)?api_key['\"]?\s*[=:]\s*)(['\"])([^'\"\s]+)(['\"])"), 3, ("api_key",)),
    (re.compile(r"(\bhf_token['\"]?\s*[=:]\s*)(['\"])([^'\"\s]+)(['\"])"), 3, ("hf_token",)),
    # SGLANG_API_KEY=KEY, HF_TOKEN="KEY" (env files, systemctl show, ps e)
    (
        re.compile(r"(\b[A-Z][A-Z0-9_]*(?:API_KEY|_TOKEN|_SECRET|PASSWORD)=)((?:\\?['\"])?)(?!\$)([^\s'\"\\]+)"),
        3,
        ("api_key", "_token", "_secret", "password"),
    ),
    # (its word is not "authorization": ignoring case, the pattern's i also matches a dotless one)
    (re.compile(r"(\bAuthorization:\s*Bearer\s+)()([^\s'\"]+)", re.IGNORECASE), 3, ("bearer",)),
)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


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


def _mask_keys(text: str) -> str:
    lower = text.lower()
    for pattern, group, words in _KEY_PATTERNS:
        if not any(w in lower for w in words) or not pattern.search(text):
            continue

        def mask(m: re.Match[str], group: int = group) -> str:
            value = m.group(group)
            if value == MASK or value in ("None", "null"):
                return m.group(0)
            if len(value) >= _LEARN_LEN:
                register_secret(value)
            start, end = m.span(group)
            return m.group(0)[: start - m.start()] + MASK + m.group(0)[end - m.start() :]

        text = pattern.sub(mask, text)
    return text


def redact(text: str) -> str:
    """``text`` with every registered secret, and every key shown as a key, replaced by :data:`MASK`."""
    if not text:
        return text
    text = _mask_keys(text)
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for s in secrets:
        if s in text:
            text = text.replace(s, MASK)
    return text


def printable(text: str) -> str:
    """``text`` with each control character but newline and tab shown as ``\\xNN`` (``ESC ]0;…BEL`` cannot
    retitle the terminal); ``\\r\\n`` becomes ``\\n``."""
    if not text:
        return text
    text = text.replace("\r\n", "\n")
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def for_terminal(text: str) -> str:
    """Text from outside, as gpuhost prints it: redacted, then :func:`printable`."""
    return printable(redact(text))


def forget_all() -> None:
    """Drop every registered secret (for tests)."""
    with _lock:
        _secrets.clear()
