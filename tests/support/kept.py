"""Waiting for the user's keeper (``ssh.persist``) to hold a node's connection, as a run would find it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest


def wait_kept(inventory: Path, node: str, env: dict[str, str], timeout: float = 30.0) -> None:
    """Until the keeper of ``env``'s runtime folder answers a read of ``node`` over its connection (asked from a
    process of its own, with that environment, as the next run asks)."""
    code = (
        "import sys; from gpuhost.inventory.loader import load_inventory; from gpuhost.connection import persist;"
        f"n = load_inventory({str(inventory)!r}).nodes[{node!r}];"
        "r = persist.read(n, 'true', 5); sys.exit(0 if r is not None and r[0] == 0 else 1)"
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, check=False).returncode == 0:
            return
        time.sleep(0.2)
    pytest.fail(f"the keeper did not hold a connection to {node} within {timeout} s")
