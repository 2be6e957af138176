"""The supervisor's control protocol: one line in, one line (JSON or "ok"/"error: ...") out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuhost.errors import LabError
from gpuhost.lab.node.line_socket import exchange


def request(socket_path: Path, command: str, timeout: float = 30.0) -> str:
    try:
        reply = exchange(str(socket_path), command, timeout)
    except OSError as exc:
        raise LabError(f"cannot reach the lab supervisor at {socket_path}: {exc}") from exc
    if reply.startswith("error:"):
        raise LabError(f"lab supervisor: {reply[6:].strip()} (command: {command})")
    return reply


def request_json(socket_path: Path, command: str) -> Any:
    return json.loads(request(socket_path, command))
