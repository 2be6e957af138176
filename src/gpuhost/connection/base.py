"""The one protocol every connection speaks: run, read_file, write_file, close.

Concrete connections implement :meth:`Connection._exec` (run a shell command with
optional stdin); file reads and atomic writes are built on it here, so that SSH, local
and container connections behave identically and each costs one round trip.
"""

from __future__ import annotations

import logging
import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gpuhost.core.result import CommandResult
from gpuhost.errors import CommandFailed

#: One DEBUG record per remote command (``-v`` prints them): extra = host, command, exit_code, duration.
remote_log = logging.getLogger("gpuhost.remote")

#: Suffix of the backups gpuhost leaves next to a file it replaced.
BACKUP_SUFFIX = ".gpuhost~"

# Exit status the read script uses for "no such file" (distinct from cat's own errors).
_MISSING = 44

_WRITE_SCRIPT = r"""
set -eu
p=$1 mode=$2 backup=$3 stamp=$4 bdir=${5:-}
d=$(dirname -- "$p"); b=$(basename -- "$p")
[ -d "$d" ] || { echo "directory $d does not exist" >&2; exit 3; }
tmp=$(mktemp "$d/.$b.gpuhost-XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp"
if [ -e "$p" ]; then
  chown --reference="$p" -- "$tmp" 2>/dev/null || true
  chmod --reference="$p" -- "$tmp"
  if [ "$backup" = 1 ]; then
    if [ -n "$bdir" ]; then mkdir -p -- "$bdir"; dest="$bdir/$(echo "$p" | tr / _ | sed 's/^_//').$stamp$BACKUP_SUFFIX"
    else dest="$p.$stamp$BACKUP_SUFFIX"; fi
    cp -p -- "$p" "$dest"; echo "$dest"
  fi
else
  chmod 0644 -- "$tmp"
fi
[ "$mode" = - ] || chmod "$mode" -- "$tmp"
sync -- "$tmp" 2>/dev/null || true
mv -f -- "$tmp" "$p"
trap - EXIT
"""


@dataclass(frozen=True)
class WriteResult:
    path: str
    backup: str | None


def to_shell(command: str | Sequence[str]) -> str:
    """A command given as a list is quoted for the shell; a string is used as written."""
    return command if isinstance(command, str) else shlex.join(command)


@runtime_checkable
class Rebootable(Protocol):
    """A connection to a machine gpuhost may reboot: it reboots it, waits, and reconnects."""

    def reboot(self, timeout: float) -> None:
        ...


class Connection(ABC):
    """A live session with one host. Not thread-safe: one per host, one thread each."""

    #: Name used in messages (the inventory name of the host).
    name: str

    @abstractmethod
    def _exec(self, command: str, stdin: bytes | None, timeout: float | None) -> CommandResult:
        """Run ``command`` through a POSIX shell on the target."""

    def run(self, command: str | Sequence[str], *, check: bool = True, input: str | bytes | None = None,
            timeout: float | None = None, ok_codes: Sequence[int] = (0,)) -> CommandResult:
        """Run a command. With ``check`` a status outside ``ok_codes`` raises :class:`CommandFailed`."""
        cmd = to_shell(command)
        data = input.encode() if isinstance(input, str) else input
        result = self._exec(cmd, data, timeout)
        if remote_log.isEnabledFor(logging.DEBUG):
            remote_log.debug("%s", cmd, extra={"host": self.name, "command": cmd, "exit_code": result.exit_code,
                                               "duration": result.duration})
        if check and result.exit_code not in ok_codes:
            raise CommandFailed(cmd, result.exit_code, result.stdout, result.stderr, host=self.name)
        return result

    def read_file(self, path: str) -> str | None:
        """The text of ``path``, or ``None`` when it does not exist."""
        script = f'[ -e {shlex.quote(path)} ] || exit {_MISSING}; cat -- {shlex.quote(path)}'
        result = self.run(script, ok_codes=(0, _MISSING))
        return None if result.exit_code == _MISSING else result.stdout

    def write_file(self, path: str, content: str | bytes, *, mode: int | None = None,
                   backup: bool = True, backup_dir: str | None = None) -> WriteResult:
        """Replace ``path`` atomically (temp file + rename in the same directory).

        An existing file keeps its owner and mode (unless ``mode`` is given) and, with
        ``backup``, a timestamped copy ``PATH.YYYYmmddTHHMMSS.gpuhost~`` is left beside it (or in
        ``backup_dir``, for directories such as ``/etc/pve`` where stray files do not belong).
        """
        data = content.encode() if isinstance(content, str) else content
        stamp = time.strftime("%Y%m%dT%H%M%S")
        mode_arg = "-" if mode is None else format(mode, "o")
        cmd = "BACKUP_SUFFIX={} sh -c {} gpuhost-write {} {} {} {} {}".format(
            shlex.quote(BACKUP_SUFFIX), shlex.quote(_WRITE_SCRIPT), shlex.quote(path), mode_arg,
            "1" if backup else "0", stamp, shlex.quote(backup_dir or ""))
        result = self.run(cmd, input=data)
        backup_path = result.stdout.strip() or None
        return WriteResult(path=path, backup=backup_path)

    def close(self) -> None:  # noqa: B027 - optional for connections without resources
        """Release the session."""

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
