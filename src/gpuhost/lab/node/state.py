"""The node's own description: what the lab made it (a JSON file every shim reads).

Part of the lab's seed; later parts add simulated hardware (GPUs) here.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuhost.lab.node import paths


@dataclass
class NodeState:
    name: str
    address: str
    boot: str  # "grub" | "systemd-boot"
    cpu: str  # "amd" | "intel"
    pve: int  # 8 | 9
    kernel: str  # running kernel release, e.g. "6.8.12-4-pve"
    root_fs: str  # "zfs" | "lvm"
    esp_uuids: list[str] = field(default_factory=list)
    token_id: str = "root@pam!gpuhost"
    extra: dict[str, Any] = field(default_factory=dict)  # room for later parts (GPUs, ...)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> NodeState:
        return cls(**json.loads(text))


def load(root: str = "/") -> NodeState:
    with open(os.path.join(root, paths.NODE_STATE.lstrip("/"))) as fh:
        return NodeState.from_json(fh.read())


def kernel_for(pve: int) -> str:
    return {8: "6.8.12-4-pve", 9: "6.14.8-2-pve"}[pve]
