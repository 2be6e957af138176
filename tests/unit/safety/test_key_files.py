"""An SSH key the inventory names that is missing, unreadable or readable by others is bad input: exit 2 with the
inventory's file, line and field, before any connection (issue 31, item 8: "a missing key_file is exit 1 at
connect, not exit 2 at load").

The node points at a TCP listener on loopback that counts connection attempts: it must see none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost.cli.app import main
from tests.support.listener import Listener

PLAY = "- hosts: all\n  tasks:\n    - copy: {dest: /tmp/x, content: y}\n"


@pytest.fixture
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out + out.err


def _inventory(tmp_path: Path, port: int, ssh: str) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(f"nodes:\n  pve1:\n    address: 127.0.0.1\n    ssh:\n      port: {port}\n{ssh}")
    return path


def _key(tmp_path: Path, mode: int) -> Path:
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n-----END OPENSSH PRIVATE KEY-----\n")
    key.chmod(mode)
    return key


@pytest.mark.parametrize("check", [[], ["--check"]], ids=["run", "check"])
def test_a_missing_key_file_is_exit_2_at_its_line_before_any_connection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener, check: list[str]
) -> None:
    inv = _inventory(tmp_path, listener.port, f"      key_file: {tmp_path / 'nope'}\n")
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    code, output = _run(capsys, ["run", str(play), "-i", str(inv), *check])
    assert code == 2, output
    assert "inventory.yml:6" in output and "field 'nodes.pve1.ssh.key_file'" in output, output
    assert "does not exist" in output
    assert listener.accepted == 0, "a host was contacted"


def test_a_key_others_can_read_is_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    key = _key(tmp_path, 0o644)
    inv = _inventory(tmp_path, listener.port, f"      key_file: {key}\n")
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    code, output = _run(capsys, ["run", str(play), "-i", str(inv)])
    assert code == 2, output
    assert "inventory.yml:6" in output and "mode 0644" in output and f"chmod 600 {key}" in output, output
    assert "not a real key" not in output
    assert listener.accepted == 0


def test_a_group_default_key_is_named_where_the_group_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    inv = tmp_path / "inventory.yml"
    inv.write_text(
        f"nodes:\n  pve1:\n    address: 127.0.0.1\n    ssh: {{port: {listener.port}}}\n"
        f"groups:\n  gpu:\n    nodes: [pve1]\n    ssh_defaults:\n      key_file: {tmp_path / 'gone'}\n"
    )
    code, output = _run(capsys, ["shell", "pve1", "-i", str(inv), "--", "true"])
    assert code == 2, output
    assert "inventory.yml:9" in output and "field 'groups.gpu.ssh_defaults.key_file'" in output, output
    assert listener.accepted == 0


def test_an_unreadable_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener) -> None:
    key = _key(tmp_path, 0o000)
    inv = _inventory(tmp_path, listener.port, f"      key_file: {key}\n")
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    if os.getuid() != 0:
        code, output = _run(capsys, ["run", str(play), "-i", str(inv)])
        assert code == 2 and "cannot be read" in output, output
        assert listener.accepted == 0
        return
    # root reads every file (CI runs as root): the same run as an unprivileged user, who cannot read the 0000 key
    shared = Path(tempfile.mkdtemp(prefix="gpuhost-keytest-"))
    try:
        shared.chmod(0o755)
        for path in (inv, play):
            (shared / path.name).write_text(path.read_text().replace(str(key), str(shared / key.name)))
        (shared / key.name).write_bytes(key.read_bytes())
        (shared / key.name).chmod(0o000)
        os.chown(shared / key.name, 0, 0)
        src = Path(__file__).resolve().parents[3] / "src"
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]  # util-linux, as unshare
        r = subprocess.run(
            [*nobody, sys.executable, "-m", "gpuhost", "run", str(shared / play.name), "-i", str(shared / inv.name)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=shared,
            env={**os.environ, "PYTHONPATH": str(src), "HOME": str(shared)},
        )
    finally:
        shutil.rmtree(shared)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "inventory.yml:6" in r.stderr and "cannot be read by this user (uid 65534)" in r.stderr, r.stderr
    assert listener.accepted == 0


def test_a_good_key_passes_the_check_and_the_connection_is_tried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    """The check refuses only what is wrong: a 0600 key goes on to the connection (which the listener ends)."""
    inv = _inventory(tmp_path, listener.port, f"      key_file: {_key(tmp_path, 0o600)}\n      connect_timeout: 2\n")
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    code, output = _run(capsys, ["run", str(play), "-i", str(inv)])
    assert code != 2, output
    assert listener.accepted >= 1
