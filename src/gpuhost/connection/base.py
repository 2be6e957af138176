"""The one protocol every connection speaks: run, read_file, write_file, put_file, get_file, close.

Concrete connections implement :meth:`Connection._exec` (run a shell command with optional
stdin, bytes or a binary stream, and optionally stream stdout into a sink); file reads and
atomic writes are built on it here, so that SSH, local and container connections behave
identically. How a write is made safe is described in :mod:`gpuhost.connection.write_script`.

Every command has a timeout: ``timeout=`` per call, else the connection's ``default_timeout``
(600 s). With ``check`` (the default) a timeout raises :class:`~gpuhost.errors.CommandTimeout`;
with ``check=False`` it returns exit status 124 and ``timed_out``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from gpuhost.connection.payload import CHUNK, Payload, Source, check_sha256, open_payload
from gpuhost.connection.write_script import BACKUP_SUFFIX, SymlinkPolicy, WriteRequest
from gpuhost.core.result import CommandResult
from gpuhost.errors import CommandFailed, CommandTimeout

#: One DEBUG record per remote command (``-v`` prints them): extra = host, command, exit_code, duration.
remote_log = logging.getLogger("gpuhost.remote")

__all__ = ["BACKUP_SUFFIX", "DEFAULT_TIMEOUT", "Connection", "Held", "Stdin", "WriteResult", "to_shell"]

#: Timeout of a command when neither the call nor the connection says otherwise.
DEFAULT_TIMEOUT = 600.0

# Exit status the read scripts use for "no such file" (distinct from cat's own errors).
_MISSING = 44

Stdin = bytes | BinaryIO | None

_STAT_SCRIPT = (
    r'p=$1; [ -f "$p" ] || exit 44; s=$(sha256sum < "$p") || exit 1; '
    r'printf "%s %s\n" "${s%% *}" "$(stat -L -c %a -- "$p")"'
)
_GET_SCRIPT = (
    r'p=$1; [ -f "$p" ] || exit 44; cat -- "$p" || exit 1; '
    r's=$(sha256sum < "$p") || exit 1; echo "${s%% *}" >&2'
)


@dataclass(frozen=True)
class WriteResult:
    """What a write did. ``sent``: content went over the wire; ``changed``: the target changed
    (content, or only its mode when the content was already right)."""

    path: str
    backup: str | None
    sha256: str = ""
    size: int = 0
    sent: bool = True
    changed: bool = True


def to_shell(command: str | Sequence[str]) -> str:
    """A command given as a list is quoted for the shell; a string is used as written."""
    return command if isinstance(command, str) else shlex.join(command)


class Held(ABC):
    """A command kept running on a channel of its own (a lock holder): its stdin stays open until
    :meth:`release`, or until the connection dies; then the remote side sees end-of-file."""

    @abstractmethod
    def read_until_line(self, timeout: float) -> str:
        """The first line it prints (without the newline); ``""`` if it printed none within ``timeout``."""

    @abstractmethod
    def read_rest(self, timeout: float) -> str:
        """Everything else it prints until it exits."""

    @abstractmethod
    def alive(self) -> bool:
        """Still running, and its channel still open."""

    @abstractmethod
    def release(self) -> None:
        """Close its stdin and the channel: the command ends."""


@runtime_checkable
class Rebootable(Protocol):
    """A connection to a machine gpuhost may reboot: it reboots it, waits, and reconnects."""

    def reboot(self, timeout: float, record: tuple[str, str] | None = None) -> None: ...

    def await_pending_reboot(self, boot_id: str, timeout: float) -> bool: ...


class Connection(ABC):
    """A live session with one host. Not thread-safe: one per host, one thread each."""

    #: remote commands run through :meth:`run` (each one round trip), for ``-v`` and ``--json``
    commands_run: int = 0

    #: Name used in messages (the inventory name of the host).
    name: str
    #: Timeout of a command run without ``timeout=`` (seconds; None: wait forever).
    default_timeout: float | None = DEFAULT_TIMEOUT

    @abstractmethod
    def _exec(
        self, command: str, stdin: Stdin, timeout: float | None, stdout_sink: BinaryIO | None = None
    ) -> CommandResult:
        """Run ``command`` through a POSIX shell on the target. ``stdin`` is sent in chunks;
        with ``stdout_sink`` the raw stdout goes there (and ``stdout`` of the result is empty).
        A timeout gives exit status 124 with ``timed_out`` set."""

    # -- commands ------------------------------------------------------------------------
    def run(
        self,
        command: str | Sequence[str],
        *,
        check: bool = True,
        input: str | bytes | BinaryIO | None = None,
        timeout: float | None = None,
        ok_codes: Sequence[int] = (0,),
        stdout_sink: BinaryIO | None = None,
    ) -> CommandResult:
        """Run a command. With ``check`` a status outside ``ok_codes`` raises :class:`CommandFailed`
        (a timeout: :class:`CommandTimeout`, naming the command and the limit)."""
        cmd = to_shell(command)
        data = input.encode() if isinstance(input, str) else input
        limit = self.default_timeout if timeout is None else timeout
        self.commands_run += 1
        result = self._exec(cmd, data, limit, stdout_sink)
        if check and result.timed_out:
            raise CommandTimeout(cmd, limit or 0, result.stdout, result.stderr, host=self.name)
        if remote_log.isEnabledFor(logging.DEBUG):
            remote_log.debug(
                "%s",
                cmd,
                extra={"host": self.name, "command": cmd, "exit_code": result.exit_code, "duration": result.duration},
            )
        if check and result.exit_code not in ok_codes:
            raise CommandFailed(cmd, result.exit_code, result.stdout, result.stderr, host=self.name)
        return result

    # -- files ---------------------------------------------------------------------------
    def read_file(self, path: str) -> str | None:
        """The text of ``path``, or ``None`` when it does not exist."""
        script = f"[ -e {shlex.quote(path)} ] || exit {_MISSING}; cat -- {shlex.quote(path)}"
        result = self.run(script, ok_codes=(0, _MISSING))
        return None if result.exit_code == _MISSING else result.stdout

    def write_file(
        self,
        path: str,
        content: str | bytes,
        *,
        mode: int | None = None,
        backup: bool = True,
        backup_dir: str | None = None,
        keep: int | None = None,
        symlinks: SymlinkPolicy = "follow",
    ) -> WriteResult:
        """Replace ``path`` atomically (temp file in the same directory, verified, renamed).

        An existing file keeps its owner and mode (unless ``mode`` is given); a new one gets
        ``mode`` or 0644, set before any content is written. With ``backup`` the old file is copied
        to ``PATH.YYYYmmddTHHMMSS.ffffff-NN.gpuhost~`` (or into ``backup_dir``, for directories such as
        ``/etc/pve`` where stray files do not belong); names sort by age and never collide.
        ``keep=N`` keeps only the newest N backups of this file (None: all). A symbolic link is
        written through (it stays a link; its target gets the content), or refused with
        ``symlinks="refuse"``.
        """
        data = content.encode() if isinstance(content, str) else content
        with open_payload(data) as payload:
            return self._send(
                payload,
                WriteRequest(path, payload.size, payload.sha256, mode, backup, backup_dir, keep, symlinks),
                timeout=None,
            )

    def put_file(
        self,
        remote_path: str,
        data: Source,
        *,
        mode: int | None = None,
        sha256: str | None = None,
        backup: bool = False,
        backup_dir: str | None = None,
        keep: int | None = None,
        symlinks: SymlinkPolicy = "follow",
        timeout: float | None = None,
    ) -> WriteResult:
        """Upload ``data`` (bytes, a local :class:`~pathlib.Path`, or a binary stream) to ``remote_path``,
        streamed, atomic and checksummed: the remote side renames only once the length and SHA-256
        (``sha256`` if given, else computed here) match. A mismatch leaves nothing behind and raises
        :class:`CommandFailed`. A destination that already has this checksum is not sent again:
        the result says ``sent=False`` (and ``changed`` only if its mode had to be corrected)."""
        with open_payload(data, sha256) as payload:
            there = self.already_there(remote_path, payload.sha256, mode, payload.size)
            if there is not None:
                return there
            request = WriteRequest(remote_path, payload.size, payload.sha256, mode, backup, backup_dir, keep, symlinks)
            return self._upload(payload, request, timeout)

    def already_there(self, remote_path: str, sha256: str, mode: int | None, size: int) -> WriteResult | None:
        """The result of a copy that need not be sent: ``remote_path`` has ``sha256`` already (its mode corrected
        if need be); None when it must be sent."""
        current = self.remote_sha256(remote_path)
        if current is None or current[0] != sha256:
            return None
        changed = mode is not None and int(current[1], 8) != mode
        if changed:
            self.run(["chmod", format(mode or 0, "04o"), "--", remote_path])
        return WriteResult(remote_path, None, sha256, size, sent=False, changed=changed)

    def _upload(self, payload: Payload, request: WriteRequest, timeout: float | None) -> WriteResult:
        """How :meth:`put_file` sends a file that must be sent (a transport may stage it elsewhere first)."""
        return self._send(payload, request, timeout)

    def get_file(
        self, remote_path: str, local_path: str | os.PathLike[str] | None = None, *, timeout: float | None = None
    ) -> bytes | Path:
        """Download ``remote_path``: its bytes, or, with ``local_path``, streamed into that file
        (atomically: a temp file beside it, renamed once the SHA-256 the remote side computed
        matches). Raises :class:`CommandFailed` if it does not exist or the checksum differs."""
        if local_path is None:
            with tempfile.SpooledTemporaryFile(max_size=64 << 20) as sink:
                self._get_into(remote_path, sink, timeout)  # type: ignore[arg-type]
                sink.seek(0)
                return sink.read()
        target = Path(local_path)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.gpuhost-", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as sink:
                self._get_into(remote_path, sink, timeout)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def remote_sha256(self, path: str) -> tuple[str, str] | None:
        """``(sha256, octal mode)`` of the regular file ``path`` (through links), or None if there is none."""
        result = self.run(["sh", "-c", _STAT_SCRIPT, "gpuhost-stat", path], ok_codes=(0, _MISSING))
        if result.exit_code == _MISSING:
            return None
        digest, mode = result.stdout.split()
        return digest, mode

    def _send(self, payload: Payload, request: WriteRequest, timeout: float | None) -> WriteResult:
        result = self.run(request.command(), input=payload.stream, timeout=timeout)
        return WriteResult(request.path, result.stdout.strip() or None, payload.sha256, payload.size)

    def _get_into(self, remote_path: str, sink: BinaryIO, timeout: float | None) -> None:
        hashing = _HashingSink(sink)
        cmd = shlex.join(["sh", "-c", _GET_SCRIPT, "gpuhost-get", remote_path])
        result = self.run(cmd, ok_codes=(0, _MISSING), timeout=timeout, stdout_sink=hashing)  # type: ignore[arg-type]
        if result.exit_code == _MISSING:
            raise CommandFailed(cmd, _MISSING, "", f"{remote_path}: no such file", host=self.name)
        lines = result.stderr.strip().splitlines()
        remote = check_sha256(lines[-1]) if lines else ""
        if remote != hashing.hexdigest():
            raise CommandFailed(
                cmd,
                result.exit_code,
                "",
                f"checksum mismatch reading {remote_path}: remote "
                f"{remote or 'none'}, received {hashing.hexdigest()} (changed while read?)",
                host=self.name,
            )

    def hold(self, command: str | Sequence[str]) -> Held | None:
        """Start ``command`` on a channel of its own and keep it running (see :class:`Held`); None when this
        kind of connection cannot (the machine gpuhost runs on, a guest reached through its node)."""
        return None

    # -- lifetime ------------------------------------------------------------------------
    def close(self) -> None:  # noqa: B027 - optional for connections without resources
        """Release the session."""

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _HashingSink:
    """A write-only binary sink that hashes what passes through it."""

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner
        self._hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self._hash.update(data)
        return self.inner.write(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def iter_chunks(stdin: Stdin) -> Iterator[bytes]:
    """The chunks of ``stdin``, read lazily from a stream."""
    if stdin is None:
        return
    if isinstance(stdin, (bytes, bytearray, memoryview)):
        view = memoryview(stdin)
        for i in range(0, len(view), CHUNK):
            yield bytes(view[i : i + CHUNK])
        return
    while chunk := stdin.read(CHUNK):
        yield chunk
