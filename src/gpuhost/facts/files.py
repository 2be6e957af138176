"""Facts about files."""

from __future__ import annotations

import shlex

from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.errors import FactError

#: Exit status the read command uses for "no such file" (distinct from cat's own errors).
MISSING = 44


def _content_cmd(path: str) -> str:
    q = shlex.quote(path)
    return f"[ -e {q} ] || exit {MISSING}; cat -- {q}"


def _content(result: CommandResult, path: str) -> str | None:
    if result.exit_code == MISSING:
        return None
    if result.exit_code != 0:
        raise FactError(f"cannot read {path}: {result.stderr.strip() or f'exit {result.exit_code}'}")
    return result.stdout


content: Fact[str | None] = Fact("file content", _content_cmd, _content)
"""The file's text, ``None`` when it does not exist."""

exists: Fact[bool] = Fact("file exists", lambda path: f"test -e {shlex.quote(path)}", lambda r, _path: r.exit_code == 0)


def _mode(result: CommandResult, _path: str) -> int | None:
    return int(result.stdout.strip(), 8) if result.exit_code == 0 and result.stdout.strip() else None


mode: Fact[int | None] = Fact("file mode", lambda path: f"stat -c %a {shlex.quote(path)} 2>/dev/null", _mode)
"""Permission bits of ``path`` (``None`` when missing)."""


def _content_and_mode_cmd(path: str) -> str:
    q = shlex.quote(path)
    return f"[ -e {q} ] || exit {MISSING}; stat -L -c %a -- {q} && cat -- {q}"


def _content_and_mode(result: CommandResult, path: str) -> tuple[str, int] | None:
    if result.exit_code == MISSING:
        return None
    first, sep, text = result.stdout.partition("\n")
    if result.exit_code != 0 or not sep or not first.isdigit():
        raise FactError(f"cannot read {path}: {result.stderr.strip() or f'exit {result.exit_code}'}")
    return text, int(first, 8)


content_and_mode: Fact[tuple[str, int] | None] = Fact("file content and mode", _content_and_mode_cmd, _content_and_mode)
"""``(text, permission bits)`` of ``path`` (through links) in one read, ``None`` when it does not exist: what a
file with a wanted mode is compared with."""

succeeds: Fact[bool] = Fact("command succeeds", lambda command: command, lambda r, _cmd: r.exit_code == 0)
"""Whether a read-only check command exits 0 (``unless``/``creates`` guards)."""


_CHECKSUM_SCRIPT = (
    r'p=$1; [ -f "$p" ] || exit 44; s=$(sha256sum < "$p") || exit 1; '
    r'printf "%s %s\n" "${s%% *}" "$(stat -L -c %a -- "$p")"'
)


def _checksum(result: CommandResult, path: str) -> tuple[str, int] | None:
    if result.exit_code == MISSING:
        return None
    parts = result.stdout.split()
    if result.exit_code != 0 or len(parts) != 2:
        raise FactError(f"cannot checksum {path}: {result.stderr.strip() or f'exit {result.exit_code}'}")
    return parts[0], int(parts[1], 8)


checksum: Fact[tuple[str, int] | None] = Fact(
    "file sha256", lambda path: shlex.join(["sh", "-c", _CHECKSUM_SCRIPT, "gpuhost-stat", path]), _checksum
)
"""``(sha256, mode)`` of the regular file ``path`` (through links), ``None`` when there is none. A file
cut short by an interrupted copy has another checksum, so it is found and replaced."""
