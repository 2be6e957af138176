"""The PEP 503 "simple" tree: ``simple/index.html`` and ``simple/<project>/index.html`` with
``#sha256=`` links to the files beside them (pip and uv read ``file://`` indexes of this shape)."""

from __future__ import annotations

import hashlib
import html
import shutil
from pathlib import Path

from gpuhost.lab.pypi.wheel import normalize

SERVED_ROOT = "/srv/gpuhost-lab"  # what the node serves over HTTP
NODE_DIR = f"{SERVED_ROOT}/pypi"
PORT = 3141  # devpi's port, on the node's own address


def index_url(address: str) -> str:
    """The index as a node and its containers reach it (``pip``/``uv pip install --index-url``)."""
    return f"http://{address}:{PORT}/pypi/simple"


def _project(filename: str) -> str:
    return normalize(filename.split("-")[0])


def write_index(root: Path, files: list[Path]) -> Path:
    """Lay ``files`` out under ``root/simple``; returns the simple directory."""
    simple = root / "simple"
    if simple.exists():
        shutil.rmtree(simple)
    simple.mkdir(parents=True)
    projects: dict[str, list[Path]] = {}
    for f in files:
        projects.setdefault(_project(f.name), []).append(f)
    for project, items in sorted(projects.items()):
        d = simple / project
        d.mkdir()
        links = []
        for f in sorted(items, key=lambda p: p.name):
            shutil.copyfile(f, d / f.name)
            sha = hashlib.sha256((d / f.name).read_bytes()).hexdigest()
            name = html.escape(f.name)
            links.append(f'    <a href="{name}#sha256={sha}">{name}</a><br/>\n')
        (d / "index.html").write_text(
            f'<!DOCTYPE html>\n<html>\n  <head><meta name="pypi:repository-version" '
            f'content="1.0"><title>Links for {project}</title></head>\n  <body>\n'
            f"    <h1>Links for {project}</h1>\n" + "".join(links) + "  </body>\n</html>\n"
        )
    body = "".join(f'    <a href="{p}/">{p}</a><br/>\n' for p in sorted(projects))
    (simple / "index.html").write_text(
        '<!DOCTYPE html>\n<html>\n  <head><meta name="pypi:repository-version" '
        'content="1.0"><title>Simple index</title></head>\n  <body>\n' + body + "  </body>\n</html>\n"
    )
    return simple
