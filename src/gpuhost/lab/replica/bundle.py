"""The lab's own reader of a capture bundle: refuses a bad or hostile one before anything starts.

The format is the one ``gpuhost capture`` writes (docs/capture.md, schema ``gpuhost-capture/1``); the lab reads
it with its own code (it never imports the product). The archive is read as a stream, member by member: a name
that leaves the bundle (absolute, ``..``), anything but a regular file or folder (symlinks, hard links, devices,
fifos), a member over the per-file budget or an archive whose bytes add up past the total budget is refused
while reading, not after; then the manifest must list exactly the files present, with their sizes and sha256.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gpuhost.errors import UsageError

SCHEMA = "gpuhost-capture/1"
MANIFEST = "manifest.json"
MAX_FILE = 16 << 20  # bytes of one member
MAX_TOTAL = 128 << 20  # bytes of all members (uncompressed)
MAX_MEMBERS = 20_000
_CHUNK = 1 << 16


class BundleError(UsageError):
    """A bundle the lab will not build from (exit 2, nothing started)."""


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: dict[str, Any]
    files: dict[str, bytes]  # bundle path (files/...) -> content
    exits: dict[str, int | None]  # bundle path -> exit status of its command (None: not known, a published capture)

    def text(self, path: str) -> str:
        """The file ``files/<path>`` as text ('' when absent or its command failed)."""
        key = f"files/{path}"
        if key not in self.files or self.exits.get(key) not in (0, None):
            return ""
        return self.files[key].decode(errors="replace")

    def under(self, folder: str) -> dict[str, str]:
        """Every file below ``files/<folder>/``: its name -> text."""
        prefix = f"files/{folder.rstrip('/')}/"
        return {
            k[len(prefix) :]: v.decode(errors="replace") for k, v in sorted(self.files.items()) if k.startswith(prefix)
        }


def _refuse(path: Path, why: str) -> BundleError:
    return BundleError(f"{path}: not a bundle the lab builds from: {why}")


def _safe_name(path: Path, name: str) -> str:
    if not name or "\\" in name or "\x00" in name:
        raise _refuse(path, f"member {name!r}: not a plain relative name")
    if name.startswith("/") or posixpath.isabs(name):
        raise _refuse(path, f"member {name!r}: absolute name")
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../") or "/../" in f"/{name}/" or norm != name.rstrip("/"):
        raise _refuse(path, f"member {name!r}: leaves the bundle or is not in normal form")
    return norm


def _read_member(path: Path, stream: IO[bytes], name: str, size: int, left: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        got += len(chunk)
        if got > min(size, MAX_FILE) or got > left:
            raise _refuse(path, f"member {name}: larger than its budget")
        chunks.append(chunk)
    return b"".join(chunks)


def load(path: Path) -> Bundle:
    """Read and check the bundle at ``path``; :class:`BundleError` (exit 2) for anything wrong."""
    path = Path(path)
    if not path.is_file():
        raise BundleError(f"--from-capture {path}: no such file")
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r|gz") as tar:
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise _refuse(path, f"more than {MAX_MEMBERS} members")
                name = _safe_name(path, member.name)
                if member.isdir():
                    continue
                if not member.isreg():
                    kind = "link" if member.issym() or member.islnk() else "device or special file"
                    raise _refuse(path, f"member {member.name!r} is a {kind}; a bundle holds regular files only")
                if member.size > MAX_FILE:
                    raise _refuse(path, f"member {name}: {member.size} bytes, over the {MAX_FILE}-byte budget")
                if total + member.size > MAX_TOTAL:
                    raise _refuse(path, f"more than {MAX_TOTAL} bytes uncompressed")
                if name in files:
                    raise _refuse(path, f"member {name} appears twice")
                stream = tar.extractfile(member)
                if stream is None:
                    raise _refuse(path, f"member {name}: unreadable")
                data = _read_member(path, stream, name, member.size, MAX_TOTAL - total)
                total += len(data)
                files[name] = data
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise _refuse(path, f"not a readable tar.gz ({exc})") from exc
    return _checked(path, files)


def _checked(path: Path, files: dict[str, bytes]) -> Bundle:
    raw = files.pop(MANIFEST, None)
    if raw is None:
        raise _refuse(path, f"no {MANIFEST}")
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise _refuse(path, f"{MANIFEST}: not JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise _refuse(path, f"{MANIFEST}: not an object")
    if doc.get("schema") != SCHEMA:
        raise _refuse(path, f"{MANIFEST}: field schema is {doc.get('schema')!r}; this gpuhost reads {SCHEMA!r}")
    entries = doc.get("files")
    if not isinstance(entries, list):
        raise _refuse(path, f"{MANIFEST}: field files is not a list")
    exits: dict[str, int | None] = {}
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("path"), str):
            raise _refuse(path, f"{MANIFEST}: files[{i}] has no path")
        name = e["path"]
        if name not in files:
            raise _refuse(path, f"{MANIFEST}: files[{i}] {name} is not in the bundle")
        data = files[name]
        if e.get("size") != len(data) or e.get("sha256") != hashlib.sha256(data).hexdigest():
            raise _refuse(path, f"{MANIFEST}: files[{i}] {name}: size or sha256 does not match the file")
        exit_code = e.get("exit")
        if exit_code is not None and (not isinstance(exit_code, int) or isinstance(exit_code, bool)):
            raise _refuse(path, f"{MANIFEST}: files[{i}] {name}: field exit is not a number or null")
        exits[name] = exit_code
    extra = sorted(set(files) - set(exits))
    if extra:
        raise _refuse(path, f"{extra[0]} is in the bundle but not in {MANIFEST}")
    return Bundle(path, doc, files, exits)
