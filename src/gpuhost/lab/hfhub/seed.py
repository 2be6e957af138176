"""Seeding a GPU node with the Hub stand-in: its source and a unit that serves the lab's model repository."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpuhost.lab.sglang import model

PORT = 3142  # beside the package index's 3141, on the node's own address
NODE_SOURCE = "/opt/gpuhost-lab/hfhub/server.py"
#: the request log on the node (method, path, status, Range; never a header's token)
REQUEST_LOG = "/var/log/gpuhost-lab/hfhub.log"
UNIT = "gpuhost-lab-hfhub.service"
UNIT_TEXT = """[Unit]
Description=Hugging Face Hub stand-in of the gpuhost lab (HTTP on the node's address)
After=network.target

[Service]
ExecStart=/usr/bin/python3 -I {source} --bind {address} --port {port} --repo {repo}={directory} --log {log}
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def endpoint(address: str) -> str:
    """The Hub as a node and its containers reach it (``HF_ENDPOINT``; the inventory's ``hf_endpoint``)."""
    return f"http://{address}:{PORT}"


def install(upper: Path, host_path: Callable[[Path, str], Path], address: str) -> None:
    """The server's source and its unit, enabled at boot; it serves the snapshot the package index's seed copies
    to :data:`gpuhost.lab.sglang.model.NODE_DIR` as :data:`gpuhost.lab.sglang.model.MODEL_ID`."""
    source = host_path(upper, NODE_SOURCE)
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text((Path(__file__).parent / "server.py").read_text())
    unit = host_path(upper, f"/etc/systemd/system/{UNIT}")
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(
        UNIT_TEXT.format(
            source=NODE_SOURCE,
            address=address,
            port=PORT,
            repo=model.MODEL_ID,
            directory=model.NODE_DIR,
            log=REQUEST_LOG,
        )
    )
    wants = host_path(upper, f"/etc/systemd/system/multi-user.target.wants/{UNIT}")
    wants.parent.mkdir(parents=True, exist_ok=True)
    if wants.is_symlink() or wants.exists():
        wants.unlink()
    wants.symlink_to(f"../{UNIT}")
