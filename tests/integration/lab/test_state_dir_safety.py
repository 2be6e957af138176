"""lab up/down touch only what the lab made: foreign directories, modes and addresses are left alone."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.errors import LabError, UsageError
from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.lab_fixtures import lab_address, require_lab_prerequisites


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from gpuhost.cli.app import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, check=False)


def _tree(root: Path) -> dict[str, tuple[int, bytes]]:
    out = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = (stat.S_IMODE(p.lstat().st_mode), p.read_bytes() if p.is_file() else b"")
    return out


def test_down_refuses_a_foreign_directory_that_merely_holds_lab_json(tmp_path: Path) -> None:
    require_lab_prerequisites()
    foreign = tmp_path / "precious"
    (foreign / "sub").mkdir(parents=True)
    (foreign / "lab.json").write_text('{"nodes": []}\n')
    (foreign / "sub" / "thesis.tex").write_text("years of work\n")
    before = _tree(foreign)
    with pytest.raises(LabError, match="no gpuhost lab marker.*nothing was removed"):
        manager.down(foreign)
    r = _cli("lab", "down", "--state-dir", str(foreign))
    assert r.returncode == 2 and "nothing was removed" in r.stderr, r.stderr
    assert _tree(foreign) == before
    with pytest.raises(UsageError, match="no gpuhost lab marker"):
        manager.up([NodeSpec("pve1", lab_address(14, 1))], foreign)
    assert _tree(foreign) == before


def test_up_refuses_a_non_empty_directory_without_changing_its_mode(tmp_path: Path) -> None:
    require_lab_prerequisites()
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    (shared / "notes.txt").write_text("mine\n")
    with pytest.raises(UsageError, match="not empty"):
        manager.up([NodeSpec("pve1", lab_address(14, 2))], shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    assert sorted(p.name for p in shared.iterdir()) == ["notes.txt"]


def test_up_refuses_a_writable_empty_directory_without_chmodding_it(tmp_path: Path) -> None:
    require_lab_prerequisites()
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(UsageError, match="writable by root only"):
        manager.up([NodeSpec("pve1", lab_address(14, 3))], open_dir)
    assert stat.S_IMODE(open_dir.stat().st_mode) == 0o777 and list(open_dir.iterdir()) == []


def test_up_refuses_an_address_already_in_use(tmp_path: Path) -> None:
    require_lab_prerequisites()
    address = lab_address(14, 4)
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind((address, 22))
        busy.listen(1)
        with pytest.raises(UsageError, match=f"{address}:22 is already in use"):
            manager.up([NodeSpec("pve1", address)], tmp_path / "state")
    assert not (tmp_path / "state").exists()


def test_down_removes_the_lab_but_not_what_others_put_beside_it(tmp_path: Path) -> None:
    require_lab_prerequisites()
    state = tmp_path / "state"
    manager.up([NodeSpec("pve1", lab_address(14, 5))], state)
    try:
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        (state / "operator-notes.txt").write_text("keep\n")
    finally:
        assert manager.down(state) is True
    assert sorted(p.name for p in state.iterdir()) == ["operator-notes.txt"]
    # a lab in a directory the lab created, untouched by others, leaves nothing
    manager.up([NodeSpec("pve1", lab_address(14, 5))], tmp_path / "clean")
    manager.down(tmp_path / "clean")
    assert not (tmp_path / "clean").exists()
