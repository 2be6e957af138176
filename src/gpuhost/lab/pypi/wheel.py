"""Writing a wheel (PEP 427) from files in memory: METADATA, WHEEL, entry points and RECORD."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

EPOCH = (2026, 10, 30, 0, 0, 0)


def normalize(name: str) -> str:
    """PEP 503 project name normalisation."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build(
    out_dir: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    *,
    summary: str,
    requires: list[str] | None = None,
    requires_python: str | None = None,
    console_scripts: dict[str, str] | None = None,
) -> Path:
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", f"Summary: {summary}"]
    if requires_python:
        meta.append(f"Requires-Python: {requires_python}")
    meta += [f"Requires-Dist: {r}" for r in requires or []]
    contents = dict(files)
    contents[f"{info}/METADATA"] = ("\n".join(meta) + "\n\nBuilt by the gpuhost lab for offline tests.\n").encode()
    contents[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: gpuhost-lab\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if console_scripts:
        contents[f"{info}/entry_points.txt"] = (
            "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in console_scripts.items())
        ).encode()
    contents[f"{info}/top_level.txt"] = (min({p.split("/")[0] for p in files}) + "\n").encode()
    record = "".join(f"{p},{_digest(d)},{len(d)}\n" for p, d in sorted(contents.items())) + f"{info}/RECORD,,\n"
    contents[f"{info}/RECORD"] = record.encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for p, d in sorted(contents.items()):
            zi = zipfile.ZipInfo(p, EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, d)
    return path
