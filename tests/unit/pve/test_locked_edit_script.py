"""The raw-edit script (pve/edit.py LOCKED_EDIT_SCRIPT) run here with sh: it re-reads the config's SHA-1 *after*
taking PVE's per-guest flock, so a change made while another tool held the lock is kept, not overwritten.

The scenario follows PVE's own sequence: a tool holds ``/run/lock/lxc/pve-config-ID.lock``
(pve-container ``PVE::LXC::Config::config_file_lock``, taken by ``lock_config``), changes the file and lets go.
Expected exit codes are the ones the runner documents: 0 written, 11 digest differs, 12 no lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import time
from pathlib import Path

from gpuhost.pve.edit import DIGEST_MISMATCH, LOCKED_EDIT_SCRIPT

OLD = b"arch: amd64\nmemory: 512\n"
NEW = b"arch: amd64\nmemory: 65536\n"
OTHER = b"arch: amd64\nmemory: 2048\n"


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def start(lock: Path, conf: Path, want: str, data: bytes) -> subprocess.Popen[bytes]:
    write = f"cat > {conf}.tmp && mv {conf}.tmp {conf}"
    proc = subprocess.Popen(
        ["sh", "-c", LOCKED_EDIT_SCRIPT, "gpuhost-locked-edit", str(lock), str(conf), want, write],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(data)
    proc.stdin.close()
    return proc


def finish(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    return proc.wait(timeout=30), err


def test_the_planned_digest_writes_the_new_config(tmp_path: Path) -> None:
    conf, lock = tmp_path / "200.conf", tmp_path / "lock" / "pve-config-200.lock"
    conf.write_bytes(OLD)
    rc, err = finish(start(lock, conf, sha1(OLD), NEW))
    assert (rc, err) == (0, "")
    assert conf.read_bytes() == NEW
    assert lock.exists()  # the lock's directory is made as PVE's lock_file does


def test_another_digest_is_refused_and_the_file_is_left_alone(tmp_path: Path) -> None:
    conf, lock = tmp_path / "200.conf", tmp_path / "pve-config-200.lock"
    conf.write_bytes(OTHER)
    rc, err = finish(start(lock, conf, sha1(OLD), NEW))
    assert rc == DIGEST_MISMATCH == 11
    assert err == f"digest {sha1(OTHER)}\n"
    assert conf.read_bytes() == OTHER
    assert not (tmp_path / "200.conf.tmp").exists()


def test_an_absent_config_has_the_digest_absent(tmp_path: Path) -> None:
    conf, lock = tmp_path / "201.conf", tmp_path / "pve-config-201.lock"
    rc, err = finish(start(lock, conf, "absent", NEW))
    assert (rc, err) == (0, "")
    assert conf.read_bytes() == NEW
    conf.unlink()
    rc, err = finish(start(lock, conf, sha1(OLD), NEW))
    assert (rc, err) == (11, "digest absent\n") and not conf.exists()


def test_a_change_made_while_another_tool_held_the_lock_is_kept(tmp_path: Path) -> None:
    conf, lock = tmp_path / "200.conf", tmp_path / "pve-config-200.lock"
    conf.write_bytes(OLD)
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # pct set, mid-change
        proc = start(lock, conf, sha1(OLD), NEW)  # planned from OLD, before the other tool's write
        time.sleep(0.5)
        assert proc.poll() is None, "the edit did not wait for the lock"
        conf.write_bytes(OTHER)  # the other tool's write, under its lock
        fcntl.flock(held, fcntl.LOCK_UN)
    rc, err = finish(proc)
    assert rc == 11 and err == f"digest {sha1(OTHER)}\n"
    assert conf.read_bytes() == OTHER


def test_the_lock_is_held_until_the_write_is_in_place(tmp_path: Path) -> None:
    """The write itself runs under the lock: a tool that asks for it meanwhile waits until the rename."""
    conf, lock = tmp_path / "200.conf", tmp_path / "pve-config-200.lock"
    conf.write_bytes(OLD)
    marker = tmp_path / "writing"
    write = f"touch {marker}; sleep 0.6; cat > {conf}.tmp && mv {conf}.tmp {conf}"
    proc = subprocess.Popen(
        ["sh", "-c", LOCKED_EDIT_SCRIPT, "gpuhost-locked-edit", str(lock), str(conf), sha1(OLD), write],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(NEW)
    proc.stdin.close()
    deadline = time.monotonic() + 10
    while not marker.exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    with lock.open("a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # blocks until the edit's shell lets go
        assert conf.read_bytes() == NEW
    assert proc.wait(timeout=10) == 0
