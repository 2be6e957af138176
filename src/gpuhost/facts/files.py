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

succeeds: Fact[bool] = Fact("command succeeds", lambda command: command, lambda r, _cmd: r.exit_code == 0)
"""Whether a read-only check command exits 0 (``unless``/``creates`` guards)."""
