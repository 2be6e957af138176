"""The supervisor's control protocol: one line in, one line (JSON or "ok"/"error: ...") out."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from gpuhost.errors import LabError


def request(socket_path: Path, command: str, timeout: float = 30.0) -> str:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(socket_path))
            sock.sendall(command.encode() + b"\n")
            chunks = []
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
    except OSError as exc:
        raise LabError(f"cannot reach the lab supervisor at {socket_path}: {exc}") from exc
    reply = b"".join(chunks).decode().strip()
    if reply.startswith("error:"):
        raise LabError(f"lab supervisor: {reply[6:].strip()} (command: {command})")
    return reply


def request_json(socket_path: Path, command: str) -> Any:
    return json.loads(request(socket_path, command))
