"""The inventory entries a GPU lab adds: the NVIDIA driver pin and its installers, and one GPU
container per node with GPUs, so gpuhost's roles run against the lab unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from gpuhost.lab.pypi.index import index_url
from gpuhost.lab.sglang.model import NODE_DIR as MODEL_DIR
from gpuhost.lab.spec import NodeSpec

CONTAINER_ID = 200


def _q(value: str) -> str:
    return json.dumps(value)


def drivers(state_dir: Path) -> dict[str, object] | None:
    path = state_dir / "gpu" / "drivers.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())


def vars_yaml(state_dir: Path) -> str:
    """The top-level ``vars:`` block (``vars: {}`` for a lab without GPUs)."""
    d = drivers(state_dir)
    if d is None:
        return "vars: {}\n"
    table: dict[str, dict[str, str]] = d["drivers"]   # type: ignore[assignment]
    pin = str(d["default"])
    out = ["vars:\n",
           f"  nvidia_driver: {{version: {_q(pin)}, url: {_q(table[pin]['url'])}, sha256: {_q(table[pin]['sha256'])}}}\n",
           "  lab_nvidia_drivers:\n"]
    for version, entry in table.items():
        out.append(f"    {_q(version)}: {{url: {_q(entry['url'])}, sha256: {_q(entry['sha256'])}}}\n")
    return "".join(out)


def node_vars(node: NodeSpec) -> str:
    """Extra entries of a GPU node's ``vars:``: its offline package index and the model snapshot
    (a directory of the node: a container gets it through a bind mount)."""
    if not node.gpus:
        return ""
    return f", pip_index_url: {_q(index_url(node.address))}, lab_model_dir: {_q(MODEL_DIR)}"


def node_yaml(node: NodeSpec) -> str:
    """Lines under a node: its GPU container."""
    if not node.gpus:
        return ""
    storage = "local-zfs" if node.boot == "systemd-boot" else "local-lvm"
    return ("    containers:\n"
            f"      {CONTAINER_ID}: {{hostname: llm, gpus: all, memory: 65536, cores: 16, swap: 0, "
            f"rootfs: {_q(storage + ':8')}}}\n")
