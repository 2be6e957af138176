"""The reboot request writes the reboot's record itself: no record without a reboot, no reboot without a record.

The command is run here by a real ``sh`` with ``reboot`` on its PATH replaced by a script that notes it ran."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from gpuhost.connection.reboot import request_command


def _run(command: str, tmp_path: Path, reboot_rc: int = 0) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "reboot"
    fake.write_text(f"#!/bin/sh\necho issued >> {tmp_path}/issued\nexit {reboot_rc}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["sh", "-c", command], check=True, env=env, cwd=tmp_path)


def _wait_for(path: Path, timeout: float = 10.0) -> str:
    """``path``'s text once something is written to it. The fake ``reboot`` appends with one write, but the shell
    creates the file before that write: an empty file means the write is still to come, not that nothing came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"nothing was written to {path} in {timeout:.0f} s")


def test_the_request_writes_the_record_then_reboots(tmp_path: Path) -> None:
    record = tmp_path / "state" / "last-reboot.json"
    line = json.dumps({"reason": "NVIDIA module 550 loaded, 570 installed; it's 'quoted'", "booted": "a b"})
    _run(request_command((str(record), line)), tmp_path)
    assert _wait_for(tmp_path / "issued") == "issued\n"
    assert json.loads(record.read_text()) == json.loads(line)
    assert record.read_text().endswith("}\n")
    assert sorted(p.name for p in record.parent.iterdir()) == ["last-reboot.json"]  # no temp left


def test_no_reboot_is_issued_when_the_record_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the folder should be\n")
    _run(request_command((str(blocker / "last-reboot.json"), "{}")), tmp_path)
    time.sleep(1.5)
    assert not (tmp_path / "issued").exists()


def test_a_record_is_one_line() -> None:
    with pytest.raises(ValueError):
        request_command(("/var/lib/gpuhost/last-reboot.json", "a\nb"))
