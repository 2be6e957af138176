"""Run a tool gpuhost ships (a Python file or zip application) on a target and read its JSON.

The target is a connection's machine, or a container on it (``ctid``: reached with ``pct``,
the tool copied in with ``pct push``). In order: check that python3 (and pct) are there and
make a private temporary directory; ``put_file`` the tool into it (checksummed, atomic); run
``python3 TOOL ARGS`` there with a timeout; remove the directory whatever happened; parse stdout
as one JSON document (``output="json"``), JSON Lines (``"jsonl"``), or return it as text.

Every failure is a :class:`ToolFailed` (a :class:`~gpuhost.errors.CommandFailed`): it names the
step, the command, the exit code and the tail of the output. Users: the P2P probe
(:mod:`gpuhost.p2p.remote`); the serving benchmark and the GPU power sampler are meant to be.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpuhost.connection.base import Connection
from gpuhost.connection.pct import PctConnection
from gpuhost.core.result import CommandResult
from gpuhost.errors import CommandFailed, GpuhostError

Output = Literal["json", "jsonl", "text"]

# Exit statuses of the preparation step.
NO_TEMP_DIR = 90
NO_PYTHON = 92
NO_PCT = 94

_PREPARE_ERRORS = {
    NO_TEMP_DIR: "cannot create a temporary directory",
    NO_PYTHON: "python3 is not installed on the target",
    NO_PCT: "pct is not available on the node (a container target needs a Proxmox VE node)",
}


class ToolFailed(CommandFailed):
    """A shipped tool could not be run, failed, or printed something that is not its JSON."""

    def __init__(
        self, step: str, command: str, exit_code: int, stdout: str = "", stderr: str = "", host: str | None = None
    ) -> None:
        self.step = step
        super().__init__(command, exit_code, stdout, stderr, host=host)
        where = f"{host}: " if host else ""
        self.message = self.message.replace(f"{where}command failed", f"{where}{step}: command failed", 1)
        self.args = (self.message,)

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class ToolOutput:
    """The parsed output (a JSON value, a list of them for JSON Lines, or the text) and the raw result."""

    data: object
    result: CommandResult


def target_of(conn: Connection, ctid: int | None) -> Connection:
    return conn if ctid is None else PctConnection(conn, ctid)


def run_tool(
    conn: Connection,
    tool: bytes | Path,
    args: Sequence[str] = (),
    *,
    name: str = "tool.pyz",
    ctid: int | None = None,
    timeout: float | None = None,
    output: Output = "json",
    ok_codes: Sequence[int] | None = (0,),
) -> ToolOutput:
    """Ship ``tool`` to ``conn``'s machine (or container ``ctid`` on it), run it, parse its stdout.

    ``ok_codes``: exit statuses whose output is parsed (None: any; the tool reports failure in its JSON)."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"tool name must be a plain file name, not {name!r}")
    if ctid is not None:
        check = conn.run(f"command -v pct >/dev/null 2>&1 || exit {NO_PCT}", check=False, timeout=60)
        if check.exit_code != 0:
            raise _prepare_failed(check, conn.name)
    target = target_of(conn, ctid)
    prepare = (
        f"command -v python3 >/dev/null 2>&1 || exit {NO_PYTHON}; "
        f'mktemp -d "${{TMPDIR:-/tmp}}/gpuhost-tool.XXXXXX" || exit {NO_TEMP_DIR}'
    )
    made = target.run(prepare, check=False, timeout=60)
    if made.exit_code != 0 or not made.stdout.strip():
        raise _prepare_failed(made, target.name)
    tmp = made.stdout.strip()
    try:
        path = f"{tmp}/{name}"
        try:
            target.put_file(path, tool, mode=0o700, timeout=timeout)
        except CommandFailed as exc:
            raise ToolFailed(
                f"cannot ship {name}",
                exc.command,
                exc.exit_code_of_command,
                exc.stdout_tail,
                exc.stderr_tail,
                host=target.name,
            ) from None
        command = f"cd {shlex.quote(tmp)} && exec python3 {shlex.quote(path)} {shlex.join(args)}".rstrip()
        result = target.run(command, check=False, timeout=timeout)
    finally:
        try:
            target.run(["rm", "-rf", "--", tmp], check=False, timeout=60)
        except GpuhostError:
            pass  # the connection is gone; the error that ended the run says so
    if result.timed_out:
        raise ToolFailed(
            f"{name} timed out after {timeout or target.default_timeout or 0:g} s",
            command,
            result.exit_code,
            result.stdout,
            result.stderr,
            host=target.name,
        )
    if ok_codes is not None and result.exit_code not in ok_codes:
        raise ToolFailed(f"{name} failed", command, result.exit_code, result.stdout, result.stderr, host=target.name)
    return ToolOutput(_parse(result, output, name, target.name), result)


def _parse(result: CommandResult, output: Output, name: str, host: str) -> object:
    if output == "text":
        return result.stdout
    try:
        if output == "json":
            return json.loads(result.stdout)
        return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise ToolFailed(
            f"{name} printed no valid JSON ({exc.msg} at line {exc.lineno})",
            result.command,
            result.exit_code,
            result.stdout,
            result.stderr,
            host=host,
        ) from None


def _prepare_failed(result: CommandResult, host: str) -> ToolFailed:
    step = _PREPARE_ERRORS.get(result.exit_code, "cannot prepare the target")
    return ToolFailed(step, result.command, result.exit_code, result.stdout, result.stderr, host=host)
