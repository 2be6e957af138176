"""The probe as one self-contained zip application (``probe.pyz``).

It holds the ``gpuhost.probe`` package renamed ``probe`` (its imports are relative)
and the ``pynvml`` module of the nvidia-ml-py installed with gpuhost, so the target
needs only python3 and the NVIDIA driver: ``python3 probe.pyz --out report.json``.
"""

from __future__ import annotations

import io
import zipfile
from importlib import resources
from pathlib import Path

from gpuhost.errors import ProbeError

_MAIN = b"import sys\nfrom probe.cli import main\nsys.exit(main())\n"
# A fixed timestamp keeps the archive identical from build to build.
_STAMP = (2020, 1, 1, 0, 0, 0)


def _pynvml_source() -> bytes:
    try:
        import pynvml
    except ImportError as exc:  # nvidia-ml-py is a dependency of gpuhost
        raise ProbeError(f"cannot build the probe: nvidia-ml-py is not installed ({exc})") from exc
    if not pynvml.__file__:
        raise ProbeError("cannot build the probe: pynvml has no source file to ship")
    return Path(pynvml.__file__).read_bytes()


def probe_sources() -> dict[str, bytes]:
    """Archive name -> content of every file the probe needs."""
    files: dict[str, bytes] = {"__main__.py": _MAIN, "pynvml.py": _pynvml_source()}
    package = resources.files("gpuhost.probe")
    for entry in sorted(package.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py"):
            files[f"probe/{entry.name}"] = entry.read_bytes()
    return files


def build_probe_zip() -> bytes:
    """The bytes of ``probe.pyz``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in probe_sources().items():
            info = zipfile.ZipInfo(name, date_time=_STAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()
