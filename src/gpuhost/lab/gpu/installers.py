"""NVIDIA ``.run`` installers for the lab: a makeself-style shell archive per driver version whose
payload is the simulated driver (:mod:`gpuhost.lab.node.nvidia`) and a real ``libcuda`` compiled
here with gcc. Built once per lab into ``<state>/nvidia``; nodes get them under
:data:`NODE_DIR` and the inventory names them with ``file://`` URLs and their SHA-256.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import io
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import gpuhost.lab.node.nvidia as nvidia_pkg
from gpuhost.errors import LabError

NODE_DIR = "/srv/gpuhost-lab/nvidia"

HEADER = """#!/bin/sh
# NVIDIA Accelerated Graphics Driver for Linux-x86_64 {version}
# gpuhost lab: a makeself-style archive; its nvidia-installer drives the lab's simulated driver.
skip={skip}
quiet=
for a in "$@"; do case "$a" in -s|--silent) quiet=1 ;; esac; done
[ -n "$quiet" ] || echo "Verifying archive integrity... OK"
[ -n "$quiet" ] || echo "Uncompressing NVIDIA Accelerated Graphics Driver for Linux-x86_64 {version}......"
tmp=$(mktemp -d /tmp/makeself.XXXXXX) || exit 1
if ! tail -n +$skip "$0" | tar xzf - -C "$tmp"; then echo "Error in checksums" >&2; rm -rf "$tmp"; exit 1; fi
python3 -I -c 'import sys; sys.path.insert(0, sys.argv[1]); from nvidia_lab.installer import main; sys.exit(main(sys.argv[1:]))' "$tmp" {version} "$@"
rc=$?
rm -rf "$tmp"
exit $rc
"""


@dataclass(frozen=True)
class Installer:
    version: str
    path: Path  # on the host, in the lab state
    sha256: str

    @property
    def file_name(self) -> str:
        return self.path.name

    @property
    def url(self) -> str:
        return f"file://{NODE_DIR}/{self.file_name}"


def c_source(name: str) -> str:
    """A C source shipped beside this module as package data: ``libcuda.c`` (the lab's ``libcuda``,
    also installed as ``libnvidia-ml``) or ``prlimit_memlock.c`` (the memlock preload)."""
    return importlib.resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def compile_shared(source: str, out: Path, what: str, flags: list[str]) -> None:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise LabError(f"the lab's GPU simulation compiles {what} with gcc: apt-get install gcc")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "lib.c"
        src.write_text(source)
        result = subprocess.run(
            [gcc, "-shared", "-fPIC", "-O2", "-Wall", *flags, "-o", str(out), str(src), "-ldl"],
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        raise LabError(f"compiling the lab's {what} failed (exit {result.returncode}): {result.stderr.strip()[-500:]}")


def compile_libcuda(version: str, out: Path) -> None:
    compile_shared(
        c_source("libcuda.c"),
        out,
        f"libcuda {version}",
        [f'-DLAB_DRIVER_VERSION="{version}"', "-Wl,-soname,libcuda.so.1"],
    )


def compile_memlock_preload(out: Path) -> None:
    compile_shared(c_source("prlimit_memlock.c"), out, "memlock preload", [])


def _payload(version: str, libcuda: Path) -> bytes:
    buf = io.BytesIO()
    pkg_dir = Path(nvidia_pkg.__file__).parent
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for src in sorted(pkg_dir.glob("*.py")):
            tar.add(src, arcname=f"nvidia_lab/{src.name}")
        for name in ("libcuda.so", "libnvidia-ml.so"):
            tar.add(libcuda, arcname=f"lib/{name}")
    return buf.getvalue()


def build_installer(version: str, out_dir: Path) -> Installer:
    out_dir.mkdir(parents=True, exist_ok=True)
    libcuda = out_dir / f".libcuda-{version}.so"
    compile_libcuda(version, libcuda)
    payload = _payload(version, libcuda)
    libcuda.unlink()
    draft = HEADER.format(version=version, skip=0)
    header = HEADER.format(version=version, skip=draft.count("\n") + 1)
    path = out_dir / f"NVIDIA-Linux-x86_64-{version}.run"
    data = header.encode() + payload
    path.write_bytes(data)
    path.chmod(0o755)
    return Installer(version, path, hashlib.sha256(data).hexdigest())


def build_installers(versions: tuple[str, ...], out_dir: Path) -> dict[str, Installer]:
    return {v: build_installer(v, out_dir) for v in versions}
