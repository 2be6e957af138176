"""The inventory entries a GPU lab adds: the NVIDIA driver pin and its installers, and one GPU
container per node with GPUs, so gpuhost's roles run against the lab unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuhost.lab.hfhub.seed import endpoint
from gpuhost.lab.pypi.index import index_url
from gpuhost.lab.sglang.model import NODE_DIR as MODEL_DIR
from gpuhost.lab.spec import NodeSpec

CONTAINER_ID = 200
SERVE_PROFILE = "glm5-nvfp4-tp8-sm120"
SERVE_GPUS = 8
#: where the container's copy of the node's model snapshot lives
CT_MODEL_DIR = "/srv/models/GLM-5-NVFP4"


def drivers(state_dir: Path) -> dict[str, object] | None:
    path = state_dir / "gpu" / "drivers.json"
    if not path.exists():
        return None
    data: dict[str, object] = json.loads(path.read_text())
    return data


def lab_vars(state_dir: Path) -> dict[str, Any]:
    """The top-level ``vars`` (empty for a lab without GPUs): the driver pin and every installer."""
    d = drivers(state_dir)
    if d is None:
        return {}
    table: dict[str, dict[str, str]] = d["drivers"]  # type: ignore[assignment]
    pin = str(d["default"])
    return {
        "nvidia_driver": {"version": pin, "url": table[pin]["url"], "sha256": table[pin]["sha256"]},
        "lab_nvidia_drivers": {
            str(version): {"url": entry["url"], "sha256": entry["sha256"]} for version, entry in table.items()
        },
    }


def node_vars(node: NodeSpec) -> dict[str, Any]:
    """Extra entries of a GPU node's ``vars``: its offline package index, its Hub stand-in and the model snapshot
    (a directory of the node: a container gets it through a bind mount)."""
    if not node.gpus:
        return {}
    return {"pip_index_url": index_url(node.address), "hf_endpoint": endpoint(node.address), "lab_model_dir": MODEL_DIR}


def containers(node: NodeSpec) -> dict[int, dict[str, Any]]:
    """A node's GPU container (none without GPUs), as an inventory ``containers`` entry."""
    if not node.gpus:
        return {}
    storage = "local-zfs" if node.boot in ("systemd-boot", "grub-pbt") else "local-lvm"
    spec: dict[str, Any] = {
        "cores": 16,
        "memory": 65536,
        "swap": 0,
        "rootfs": f"{storage}:8",
        "hostname": "llm",
        "gpus": "all",
    }
    if node.gpus >= SERVE_GPUS:  # the shipped GLM-5 profiles are TP8
        spec["serve"] = {
            "profile": SERVE_PROFILE,
            "model": CT_MODEL_DIR,
            "model_node_dir": MODEL_DIR,
            "host": node.address,  # containers share the host's network: each lab listens on its own address
            "port": 30000,
        }
    return {CONTAINER_ID: spec}


def vms(node: NodeSpec, ssh: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """A node's seeded GPU VM, with the address its guest answers on once started."""
    if not node.gpu_vm:
        return {}
    from gpuhost.lab.guest_seed import guest_address

    return {node.gpu_vm: {"gpus": "all", "address": guest_address(node), "ssh": dict(ssh)}}
