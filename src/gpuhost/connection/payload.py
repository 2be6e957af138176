"""What ``put_file`` sends: bytes, a local file or a binary stream, with its length and SHA-256 known up front.

The remote side must be told both before the first byte arrives (it renames only when both
match), so a stream whose length or checksum is unknown is first spooled to a local
temporary file while hashing: a multi-GB installer is never held in memory.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")

Source = bytes | bytearray | memoryview | Path | BinaryIO


@dataclass
class Payload:
    stream: BinaryIO
    size: int
    sha256: str


def check_sha256(value: str) -> str:
    low = value.strip().lower()
    if not _SHA256.fullmatch(low):
        raise ValueError(f"not a SHA-256 (64 hex digits): {value!r}")
    return low


def hash_stream(stream: BinaryIO) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    while chunk := stream.read(CHUNK):
        h.update(chunk)
        size += len(chunk)
    return size, h.hexdigest()


@contextmanager
def open_payload(data: Source, sha256: str | None = None) -> Iterator[Payload]:
    """The payload with its size and checksum. A given ``sha256`` is trusted here: the remote side
    verifies it, so a source that does not match it is refused there and nothing is left behind."""
    want = check_sha256(sha256) if sha256 else None
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        yield Payload(io.BytesIO(raw), len(raw), want or hashlib.sha256(raw).hexdigest())
        return
    if isinstance(data, (str, os.PathLike)):
        with open(data, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            digest = want
            if digest is None:
                _, digest = hash_stream(fh)
                fh.seek(0)
            yield Payload(fh, size, digest)
        return
    if _seekable(data):
        start = data.tell()
        size = data.seek(0, io.SEEK_END) - start
        data.seek(start)
        digest = want
        if digest is None:
            _, digest = hash_stream(data)
            data.seek(start)
        yield Payload(data, size, digest)
        return
    with tempfile.TemporaryFile(prefix="gpuhost-spool-") as spool:
        h = hashlib.sha256()
        size = 0
        while chunk := data.read(CHUNK):
            spool.write(chunk)
            h.update(chunk)
            size += len(chunk)
        spool.seek(0)
        yield Payload(spool, size, want or h.hexdigest())


def _seekable(stream: BinaryIO) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, OSError, ValueError):
        return False
