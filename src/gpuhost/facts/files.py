"""Facts about files."""

from __future__ import annotations

import shlex

from gpuhost.connection.base import Connection


def content(conn: Connection, path: str) -> str | None:
    """The file's text, ``None`` when it does not exist."""
    return conn.read_file(path)


def exists(conn: Connection, path: str) -> bool:
    return conn.run(f"test -e {shlex.quote(path)}", ok_codes=(0, 1)).exit_code == 0


def mode(conn: Connection, path: str) -> int | None:
    """Permission bits of ``path`` (``None`` when missing)."""
    result = conn.run(f"stat -c %a {shlex.quote(path)} 2>/dev/null", ok_codes=(0, 1))
    return int(result.stdout.strip(), 8) if result.exit_code == 0 else None


def succeeds(conn: Connection, command: str) -> bool:
    """Whether a read-only check command exits 0."""
    return conn.run(command, check=False).exit_code == 0
