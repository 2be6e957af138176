"""What a node's cluster tools ask the lab supervisor, which keeps the cluster's corosync and HA state
(:mod:`gpuhost.lab.cluster`): one request line on the node's supervisor socket, one reply line."""

from __future__ import annotations

import json
from typing import Any

from gpuhost.lab.node import paths
from gpuhost.lab.node.line_socket import exchange


class NotClustered(Exception):
    """This node is no cluster member."""


def ask(request: str) -> str:
    reply = exchange(paths.SUPERVISOR_SOCKET, request)
    if reply == "error: not a cluster member":
        raise NotClustered()
    return reply


def ask_json(request: str) -> dict[str, Any]:
    reply = ask(request)
    if reply.startswith("error:"):
        raise RuntimeError(reply)
    data: dict[str, Any] = json.loads(reply)
    return data
