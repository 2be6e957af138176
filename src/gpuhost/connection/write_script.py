"""The remote half of every file write: a POSIX ``sh`` script that receives the content on stdin.

The protocol, in order:

1. the caller announces the content's length and SHA-256 as arguments (never inside the data);
2. a symbolic link is resolved (written through: the link stays a link) or refused;
3. a temporary file ``.NAME.gpuhost-XXXXXX`` is created in the target's directory, mode 0600
   (``mktemp``), and given the final owner and mode *before* any content is written, so a new
   0600 file is never readable by others, not even briefly;
4. stdin is copied into it; then its length and SHA-256 are compared with the announced ones.
   A dropped channel or truncated stdin ends ``cat`` early: the length differs, and the
   temporary file is removed, never renamed into place;
5. with ``backup`` the old file is copied to a unique, sortable name (``PATH.STAMP-NN.gpuhost~``,
   a microsecond stamp plus a counter: an existing backup is never overwritten), and with
   ``keep`` only the newest N backups of that file are kept;
6. the temporary file is renamed over the target (atomic within one directory).

The temporary file is removed on EXIT and on HUP, INT, PIPE and TERM (without the signal
traps, SIGPIPE would kill the shell before its EXIT trap runs). The backup path, if any, is
printed only after the rename, so a reader that went away cannot stop the write half-way.

With ``PUSHED=TEMP`` in the environment the content is not read from stdin: ``TEMP`` (a file
beside the target, already filled by ``pct push``) is verified and renamed the same way.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

#: Suffix of the backups gpuhost leaves next to a file it replaced.
BACKUP_SUFFIX = ".gpuhost~"

SymlinkPolicy = Literal["follow", "refuse"]

# Exit statuses of the script (beyond a signal's 128+N).
NO_DIRECTORY = 3
NO_TEMP = 4
IS_SYMLINK = 5
WRITE_FAILED = 6
TRUNCATED = 7
CHECKSUM_MISMATCH = 8
BACKUP_FAILED = 9
RENAME_FAILED = 10

#: Shell: print a fresh temporary name beside ``$1`` (links resolved, or refused when ``$2`` is refuse).
TEMP_NAME_SCRIPT = r"""
p=$1
if [ -L "$p" ]; then
  [ "$2" = follow ] || { printf '%s\n' "$p is a symbolic link; refusing to write through it" >&2; exit 5; }
  p=$(readlink -f -- "$p") || exit 3
fi
d=$(dirname -- "$p") b=$(basename -- "$p")
[ -d "$d" ] || { printf '%s\n' "directory $d does not exist" >&2; exit 3; }
# a temp of this target a killed run left (pct push copies the whole file before gpuhost renames it): under the
# run lock no other write of this target is under way, so it is removed before a new one is made
rm -f -- "$d/.$b.gpuhost-"??????
mktemp -- "$d/.$b.gpuhost-XXXXXX"
"""

WRITE_SCRIPT = r"""
set -u
export LC_ALL=C
p=$1 mode=$2 backup=$3 stamp=$4 bdir=$5 size=$6 sum=$7 links=$8 keep=$9
tmp=
cleanup() { if [ -n "$tmp" ]; then rm -f -- "$tmp"; fi; }
trap cleanup EXIT
trap 'cleanup; trap - EXIT; exit 129' HUP
trap 'cleanup; trap - EXIT; exit 130' INT
trap 'cleanup; trap - EXIT; exit 141' PIPE
trap 'cleanup; trap - EXIT; exit 143' TERM
fail() { code=$1; shift; printf '%s\n' "$*" >&2; exit "$code"; }
if [ -L "$p" ]; then
  [ "$links" = follow ] || fail 5 "$p is a symbolic link; refusing to write through it"
  t=$(readlink -f -- "$p") || fail 3 "$p is a symbolic link whose directory does not exist"
  p=$t
fi
d=$(dirname -- "$p"); b=$(basename -- "$p")
[ -d "$d" ] || fail 3 "directory $d does not exist"
[ ! -d "$p" ] || fail 3 "$p is a directory"
if [ -n "${PUSHED:-}" ]; then
  [ "$(dirname -- "$PUSHED")" = "$d" ] && [ -f "$PUSHED" ] || fail 4 "$PUSHED is not a file beside $p"
  tmp=$PUSHED
else
  tmp=$(mktemp -- "$d/.$b.gpuhost-XXXXXX") || fail 4 "cannot create a temporary file in $d"
fi
if [ -e "$p" ]; then
  chown --reference="$p" -- "$tmp" 2>/dev/null || true
  chmod --reference="$p" -- "$tmp" || fail 4 "cannot copy the mode of $p"
elif [ "$mode" = - ]; then
  chmod 0644 -- "$tmp" || fail 4 "cannot chmod $tmp"
fi
if [ "$mode" != - ]; then chmod "$mode" -- "$tmp" || fail 4 "cannot chmod $tmp to $mode"; fi
if [ -z "${PUSHED:-}" ]; then cat > "$tmp" || fail 6 "cannot write $tmp"; fi
n=$(wc -c < "$tmp")
[ "$n" -eq "$size" ] || fail 7 "received $n of $size bytes (stream interrupted); $p left unchanged"
got=$(sha256sum < "$tmp") || fail 8 "cannot checksum $tmp"
got=${got%% *}
[ "$got" = "$sum" ] || fail 8 "checksum mismatch: received $got, expected $sum; $p left unchanged"
sync -- "$tmp" 2>/dev/null || true
out=
if [ "$backup" = 1 ] && [ -e "$p" ]; then
  if [ -n "$bdir" ]; then
    mkdir -p -- "$bdir" || fail 9 "cannot create $bdir"
    base=$bdir/$(printf '%s' "$p" | tr / _ | sed 's/^_//')
  else
    base=$p
  fi
  i=0
  while :; do
    dest=$(printf '%s.%s-%02d%s' "$base" "$stamp" "$i" "$SUFFIX")
    [ -e "$dest" ] || [ -L "$dest" ] || break
    i=$((i + 1))
  done
  cp -p -- "$p" "$dest" || fail 9 "cannot back up $p to $dest"
  out=$dest
fi
mv -f -- "$tmp" "$p" || fail 10 "cannot rename $tmp to $p"
tmp=
if [ -n "$out" ] && [ "$keep" -gt 0 ]; then
  set -- "$base".[0-9]*"$SUFFIX"
  drop=$(($# - keep))
  while [ "$drop" -gt 0 ]; do rm -f -- "$1"; shift; drop=$((drop - 1)); done
fi
[ -z "$out" ] || printf '%s\n' "$out"
"""


@dataclass(frozen=True)
class WriteRequest:
    """One write: where, what mode, and the announced length and checksum of the content."""

    path: str
    size: int
    sha256: str
    mode: int | None = None
    backup: bool = True
    backup_dir: str | None = None
    keep: int | None = None
    symlinks: SymlinkPolicy = "follow"

    def command(self, stamp: str | None = None) -> str:
        """The shell command that performs the write, reading the content from stdin."""
        if self.symlinks not in ("follow", "refuse"):
            raise ValueError(f"symlinks must be 'follow' or 'refuse', not {self.symlinks!r}")
        if self.keep is not None and self.keep < 1:
            raise ValueError("keep must be at least 1 (or None: keep every backup)")
        stamp = stamp or backup_stamp()
        mode_arg = "-" if self.mode is None else format(self.mode, "04o")
        args = [
            self.path,
            mode_arg,
            "1" if self.backup else "0",
            stamp,
            self.backup_dir or "",
            str(self.size),
            self.sha256,
            self.symlinks,
            str(self.keep or 0),
        ]
        return f"SUFFIX={shlex.quote(BACKUP_SUFFIX)} sh -c {shlex.quote(WRITE_SCRIPT)} gpuhost-write " + shlex.join(
            args
        )


def backup_stamp() -> str:
    """Sortable, sub-second: ``20261201T085310.123456`` (the script adds a counter)."""
    return datetime.now().strftime("%Y%m%dT%H%M%S.%f")
