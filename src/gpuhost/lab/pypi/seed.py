"""Seeding nodes with the package index and the model snapshot (called from the GPU seed hook)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gpuhost.lab.pypi.index import NODE_DIR, write_index
from gpuhost.lab.sglang import model, wheels

#: where ``scripts/setup.sh`` caches real wheels fetched once (``uv``)
WHEEL_CACHE_ENV = "GPUHOST_LAB_WHEEL_CACHE"
DEFAULT_WHEEL_CACHE = "/var/cache/gpuhost-lab/wheels"


def cached_wheels() -> list[Path]:
    cache = Path(os.environ.get(WHEEL_CACHE_ENV, DEFAULT_WHEEL_CACHE))
    return sorted(cache.glob("uv-*.whl")) if cache.is_dir() else []


def build(lab_root: Path) -> Path:
    """Build the index once per lab under ``<state>/pypi``; returns that directory."""
    root = lab_root / "pypi"
    if (root / "simple" / "index.html").exists():
        return root
    files = wheels.build_all(root / "dist") + cached_wheels()
    write_index(root, files)
    model.write_snapshot(root / "models" / "GLM-5-NVFP4")
    return root


def install(lab_root: Path, upper: Path, host_path: callable[[Path, str], Path]) -> None:  # type: ignore[valid-type]
    root = build(lab_root)
    for src, dest in ((root / "simple", f"{NODE_DIR}/simple"), (root / "models" / "GLM-5-NVFP4", model.NODE_DIR)):
        target = host_path(upper, dest)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(src, target)
