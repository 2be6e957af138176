"""Run a tool gpuhost ships (a Python file or zip application) on a target and read its JSON.

The target is a connection's machine, or a container on it (``ctid``: reached with ``pct``,
the tool copied in with ``pct push``). In order: check that python3 (and pct) are there and
make a private temporary directory; ``put_file`` the tool into it (checksummed, atomic); run
``python3 TOOL ARGS`` there with a timeout; remove the directory whatever happened; parse stdout
as one JSON document (``output="json"``), JSON Lines (``"jsonl"``), or return it as text.

Every failure is a :class:`ToolFailed` (a :class:`~gpuhost.errors.CommandFailed`): it names the
step, the command, the exit code and the tail of the output. Users: the P2P probe
(:mod:`gpuhost.p2p.remote`), the serve probe, and the serving benchmark's levels. :func:`start_tool` leaves a
tool running in the background (the GPU sampler during a benchmark sweep) until its :meth:`BackgroundTool.stop`.
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


def _prepare(conn: Connection, ctid: int | None, name: str) -> tuple[Connection, str]:
    """The target (the machine, or container ``ctid`` on it) and a fresh private directory there for the tool."""
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
    return target, tmp


def _ship(target: Connection, path: str, tool: bytes | Path, name: str, timeout: float | None) -> None:
    """Put the tool at ``path`` on the target (checksummed, atomic), or a :class:`ToolFailed` naming the step."""
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
    target, tmp = _prepare(conn, ctid, name)
    try:
        path = f"{tmp}/{name}"
        _ship(target, path, tool, name, timeout)
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


def run_inline(
    conn: Connection,
    name: str,
    args: Sequence[str] = (),
    *,
    ctid: int | None = None,
    timeout: float | None = None,
    ok_codes: Sequence[int] | None = (0,),
) -> ToolOutput:
    """Run the stdlib-only Python program ``name`` of :mod:`gpuhost.tools` on ``conn``'s machine (or container
    ``ctid`` on it) in one round trip: its source travels in the command (``python3 -c``, base64), nothing is
    copied or left behind. Its stdout is parsed as one JSON document; failures are :class:`ToolFailed` as with
    :func:`run_tool` (a missing python3 says so)."""
    from gpuhost.resources import tool_command

    target = target_of(conn, ctid)
    shown = f"python3 {name} {shlex.join(args)}".rstrip()  # what errors name (not the program's base64)
    raw = target.run(tool_command("python3", name, list(args)), check=False, timeout=timeout)
    result = CommandResult(shown, raw.exit_code, raw.stdout, raw.stderr, raw.duration, timed_out=raw.timed_out)
    if result.timed_out:
        raise ToolFailed(
            f"{name} timed out after {timeout or target.default_timeout or 0:g} s",
            shown,
            result.exit_code,
            result.stdout,
            result.stderr,
            host=target.name,
        )
    if result.exit_code == 127 and "python3" in result.stderr:
        raise ToolFailed(_PREPARE_ERRORS[NO_PYTHON], shown, result.exit_code, "", result.stderr, host=target.name)
    if ok_codes is not None and result.exit_code not in ok_codes:
        raise ToolFailed(f"{name} failed", shown, result.exit_code, result.stdout, result.stderr, host=target.name)
    return ToolOutput(_parse(result, "json", name, target.name), result)


@dataclass
class BackgroundTool:
    """A shipped tool left running on the target (:func:`start_tool`): its process id and private directory.

    :meth:`stop` ends it (SIGTERM, then SIGKILL after ``grace`` seconds), returns what it printed and removes its
    directory; it is safe to call more than once."""

    target: Connection
    tmp: str
    pid: int
    name: str
    stopped: bool = False
    output: str = ""

    @property
    def _out(self) -> str:
        return f"{self.tmp}/stdout"

    def running(self) -> bool:
        """Whether the tool's process is still alive (and still the tool: its command line names its directory)."""
        r = self.target.run(self._is_it(), check=False, timeout=60)
        return r.exit_code == 0

    def _is_it(self) -> str:
        return f"tr '\\0' ' ' < /proc/{self.pid}/cmdline 2>/dev/null | grep -qF -- {shlex.quote(self.tmp + '/')}"

    def read_output(self) -> str:
        """What the tool has printed so far (stdout).

        The file may still be growing, so what is read is a copy taken first: the checksummed read of the live
        file could see it change between the bytes and their checksum."""
        snapshot = f"{self.tmp}/stdout.read"
        self.target.run(["cp", "--", self._out, snapshot], timeout=60)
        return self._read(snapshot)

    def _read(self, path: str) -> str:
        data = self.target.get_file(path, timeout=300)
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else ""

    def stop(self, grace: float = 10.0) -> str:
        if self.stopped:
            return self.output
        tries = max(1, int(grace / 0.2))
        script = (
            f"if {self._is_it()}; then kill -TERM {self.pid}; "
            f"i=0; while [ $i -lt {tries} ] && {self._is_it()}; do sleep 0.2; i=$((i+1)); done; "
            f"if {self._is_it()}; then kill -KILL {self.pid}; echo killed; fi; fi"
        )
        try:
            self.target.run(script, check=False, timeout=grace + 60)
            try:
                self.output = self._read(self._out)  # the tool has ended: its file no longer grows
            except CommandFailed:
                self.output = ""
        finally:
            try:
                self.target.run(["rm", "-rf", "--", self.tmp], check=False, timeout=60)
            except GpuhostError:
                pass
            self.stopped = True
        return self.output


def start_tool(
    conn: Connection,
    tool: bytes | Path,
    args: Sequence[str] = (),
    *,
    name: str = "tool.pyz",
    ctid: int | None = None,
) -> BackgroundTool:
    """Ship ``tool`` like :func:`run_tool` (within the connection's default timeout) and start it in the background
    (its own session, stdout to a file in its private directory); the caller must :meth:`BackgroundTool.stop` it
    (in a ``finally``)."""
    target, tmp = _prepare(conn, ctid, name)
    path = f"{tmp}/{name}"
    try:
        _ship(target, path, tool, name, None)
        q = shlex.quote(tmp)
        command = (
            f"cd {q} && {{ nohup python3 {shlex.quote(path)} {shlex.join(args)} "
            f"> {q}/stdout 2> {q}/stderr < /dev/null & }} && echo $!"
        )
        result = target.run(command, check=False, timeout=60)
        pid = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        if result.exit_code != 0 or not pid.isdigit():
            raise ToolFailed(
                f"{name} did not start", command, result.exit_code, result.stdout, result.stderr, target.name
            )
    except BaseException:
        try:
            target.run(["rm", "-rf", "--", tmp], check=False, timeout=60)
        except GpuhostError:
            pass
        raise
    return BackgroundTool(target, tmp, int(pid), name)


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
