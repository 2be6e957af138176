"""This user's cache folders (``$XDG_CACHE_HOME/gpuhost/NAME``, default ``~/.cache``): what gpuhost keeps between
runs to go faster, never to decide anything a run does not see for itself.

Everything here is a copy of something the run could work out again, so a file is used only when this user owns
it and its folder and neither can be written by others (as OpenSSH trusts a config file), and any trouble reading
or writing it means working it out again. Files are written whole (a temporary file renamed over the old one),
readable by their owner only, in a folder only the owner can enter.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def folder(name: str) -> Path:
    """The cache folder ``name`` (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuhost" / name


def trusted(path: Path) -> bool:
    """``path`` and its folder are this user's and no one else can write them."""
    try:
        for part in (path.parent, path):
            st = part.stat()
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                return False
    except OSError:
        return False
    return True


def write(path: Path, data: bytes) -> None:
    """Put ``data`` at ``path`` whole (readers see the old file or the new one), mode 0600, its folder made 0700
    when missing. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
