"""The bundle: ``manifest.json`` and the files it lists, written as one tar.gz, all or nothing.

Schema ``gpuhost-capture/1`` (docs/capture.md): the manifest names every file with the command that produced
it, its exit status, size and sha256. The archive is written to a temporary file beside the target and renamed
onto it at the end: an interrupted capture leaves no bundle (and no temporary file, unless killed by SIGKILL).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuhost.errors import GpuhostError

SCHEMA = "gpuhost-capture/1"
MANIFEST = "manifest.json"


class CaptureError(GpuhostError):
    """A capture that cannot produce a bundle (over its size budget, an unwritable target)."""


@dataclass(frozen=True)
class Budget:
    per_file: int = 8 << 20  # bytes of one command's output (more is cut, and the manifest says so)
    total: int = 64 << 20  # bytes of all files together (more: no bundle)


@dataclass(frozen=True)
class BundleFile:
    path: str  # inside the bundle, under files/
    command: str
    exit_code: int
    data: bytes
    truncated: bool = False
    scrubbed_lines: int = 0
    source: str = ""  # the host's file, for one file of a multi-file probe

    def entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "command": self.command,
            "exit": self.exit_code,
            "size": len(self.data),
            "sha256": hashlib.sha256(self.data).hexdigest(),
        }
        if self.source:
            out["source"] = self.source
        if self.truncated:
            out["truncated"] = True
        if self.scrubbed_lines:
            out["scrubbed_lines"] = self.scrubbed_lines
        return out


def manifest(
    node: str, files: list[BundleFile], *, taken: str, anonymised: bool, budget: Budget, version: str = ""
) -> dict[str, Any]:
    """``version``: the gpuhost that took it (the CLI passes its own)."""
    return {
        "schema": SCHEMA,
        "node": node,
        "taken": taken,
        "gpuhost": version,
        "anonymised": anonymised,
        "budget": {"per_file": budget.per_file, "total": budget.total},
        "files": [f.entry() for f in files],
    }


def write_bundle(target: Path, doc: dict[str, Any], files: list[BundleFile], budget: Budget) -> None:
    """Write the bundle to ``target`` atomically (a temporary file in its folder, renamed at the end)."""
    total = sum(len(f.data) for f in files)
    if total > budget.total:
        raise CaptureError(
            f"capture of {doc['node']}: {total} bytes is over the bundle's budget of {budget.total} "
            "(raise it with --max-total-mib); no bundle written"
        )
    target = Path(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent or Path("."))
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
                _add(tar, MANIFEST, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
                for f in files:
                    _add(tar, f.path, f.data)
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o600
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))
