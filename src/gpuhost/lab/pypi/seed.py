"""Seeding GPU nodes with the package index and the model snapshot (called from the GPU seed hook)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from gpuhost.lab.pypi.index import NODE_DIR, PORT, SERVED_ROOT, write_index
from gpuhost.lab.sglang import model, wheels

#: where ``scripts/setup.sh`` caches real wheels fetched once (``uv``; ``smg``, the SGLang Model Gateway;
#: ``huggingface_hub``; and their dependencies)
WHEEL_CACHE_ENV = "GPUHOST_LAB_WHEEL_CACHE"
DEFAULT_WHEEL_CACHE = "/var/cache/gpuhost-lab/wheels"
UNIT = "gpuhost-lab-files.service"
UNIT_TEXT = """[Unit]
Description=Offline package index and model files of the gpuhost lab (HTTP on the node's address)
After=network.target

[Service]
ExecStart=/usr/bin/python3 -I -m http.server {port} --bind {address} --directory {root}
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def cached_wheels() -> list[Path]:
    cache = Path(os.environ.get(WHEEL_CACHE_ENV, DEFAULT_WHEEL_CACHE))
    return sorted(cache.glob("*.whl")) if cache.is_dir() else []


def build(lab_root: Path) -> Path:
    """Build the index once per lab under ``<state>/pypi``; returns that directory."""
    root = lab_root / "pypi"
    if (root / "simple" / "index.html").exists():
        return root
    files = wheels.build_all(root / "dist") + cached_wheels()
    write_index(root, files)
    model.write_snapshot(root / "models" / "GLM-5-NVFP4")
    return root


def install(lab_root: Path, upper: Path, host_path: Callable[[Path, str], Path], address: str) -> None:
    """Copy the index and the model snapshot into a node and enable the unit that serves them, so
    the node and its containers (which share its network, not its files) reach them over HTTP."""
    root = build(lab_root)
    for src, dest in ((root / "simple", f"{NODE_DIR}/simple"), (root / "models" / "GLM-5-NVFP4", model.NODE_DIR)):
        target = host_path(upper, dest)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(src, target)
    unit = host_path(upper, f"/etc/systemd/system/{UNIT}")
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(UNIT_TEXT.format(port=PORT, address=address, root=SERVED_ROOT))
    wants = host_path(upper, f"/etc/systemd/system/multi-user.target.wants/{UNIT}")
    wants.parent.mkdir(parents=True, exist_ok=True)
    if wants.is_symlink() or wants.exists():
        wants.unlink()
    wants.symlink_to(f"../{UNIT}")
