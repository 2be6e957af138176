"""Integration fixtures: real OpenSSH sshd hosts on this process's block of 127.82.0.0/16 (root required)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab_fixtures import reserved_address
from tests.support.sshd_host import SshdHost, make_host, remove

_ADDRESSES = (reserved_address(82, i // 250, i % 250 + 1) for i in range(20 * 250))


def _require_root() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None or not Path("/usr/sbin/sshd").exists():
        pytest.fail("integration tests need root, unshare and openssh-server (see .ci/run)")


@pytest.fixture
def sshd_host() -> Iterator[SshdHost]:
    """A fresh host per test, so tests cannot see each other's changes."""
    _require_root()
    host = make_host("node1", next(_ADDRESSES)).start()
    yield host
    remove(host)


def write_inventory(path: Path, hosts: list[SshdHost], extra: str = "") -> Path:
    lines = ["nodes:"]
    for h in hosts:
        lines += [
            f"  {h.name}:",
            f"    address: {h.address}",
            "    ssh:",
            f"      key_file: {h.client_key}",
            f"      known_hosts_file: {h.known_hosts}",
        ]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path
