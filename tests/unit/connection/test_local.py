import os
import stat

import pytest

from gpuhost.connection.base import BACKUP_SUFFIX
from gpuhost.connection.local import LocalConnection
from gpuhost.errors import CommandFailed
from gpuhost.redact import register_secret


def test_write_file_replaces_atomically_keeps_mode_and_backs_up(tmp_path):
    conn = LocalConnection()
    target = tmp_path / "modules"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    inode_before = target.stat().st_ino
    result = conn.write_file(str(target), "new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.stat().st_ino != inode_before, "a rename, not an in-place write"
    assert result.backup is not None and result.backup.endswith(BACKUP_SUFFIX)
    assert open(result.backup).read() == "old\n"
    leftovers = [p.name for p in tmp_path.iterdir() if "gpuhost-" in p.name and not p.name.endswith("~")]
    assert leftovers == []


def test_write_new_file_gets_requested_mode_and_no_backup(tmp_path):
    conn = LocalConnection()
    result = conn.write_file(str(tmp_path / "f"), b"\x00bin", mode=0o600)
    assert result.backup is None
    assert (tmp_path / "f").read_bytes() == b"\x00bin"
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o600


def test_write_into_missing_directory_fails_and_leaves_nothing(tmp_path):
    with pytest.raises(CommandFailed, match="does not exist"):
        LocalConnection().write_file(str(tmp_path / "nope" / "f"), "x")
    assert not (tmp_path / "nope").exists()


def test_read_file_missing_is_none(tmp_path):
    conn = LocalConnection()
    assert conn.read_file(str(tmp_path / "missing")) is None
    (tmp_path / "there").write_text("a\nb\n")
    assert conn.read_file(str(tmp_path / "there")) == "a\nb\n"


def test_failed_command_carries_command_exit_code_and_output_tail():
    conn = LocalConnection("node1")
    with pytest.raises(CommandFailed) as info:
        conn.run("for i in $(seq 1 50); do echo line$i; done; echo oops >&2; exit 7")
    err = info.value
    assert err.exit_code_of_command == 7
    assert "exit 7" in str(err) and "node1" in str(err)
    assert "line50" in err.stdout_tail and "line1\n" not in err.stdout_tail
    assert "oops" in err.stderr_tail


def test_secrets_are_redacted_from_command_errors():
    register_secret("tok-5e3c7a9b")
    with pytest.raises(CommandFailed) as info:
        LocalConnection().run("echo using tok-5e3c7a9b; exit 1")
    assert "tok-5e3c7a9b" not in str(info.value)
    assert "********" in str(info.value)


def test_timeout_reports_124():
    result = LocalConnection().run("sleep 5", check=False, timeout=0.2)
    assert result.exit_code == 124
    assert "timed out" in result.stderr


def test_backup_can_go_to_a_separate_directory(tmp_path):
    conn = LocalConnection()
    pve = tmp_path / "pve" / "lxc"
    pve.mkdir(parents=True)
    (pve / "200.conf").write_text("arch: amd64\n")
    result = conn.write_file(str(pve / "200.conf"), "arch: amd64\ncores: 8\n", backup_dir=str(tmp_path / "bk"))
    assert sorted(p.name for p in pve.iterdir()) == ["200.conf"]
    assert result.backup.startswith(str(tmp_path / "bk"))
    assert open(result.backup).read() == "arch: amd64\n"
