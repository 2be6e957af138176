"""The write protocol on the local connection: announced length and checksum, mode before content,
cleanup on signals, symlinks, unique backups with retention, put_file/get_file."""

import hashlib
import io
import os
import signal
import stat
import subprocess
import threading
import time

import pytest

from gpuhost.connection.base import BACKUP_SUFFIX
from gpuhost.connection.local import LocalConnection
from gpuhost.connection.write_script import WriteRequest
from gpuhost.errors import CommandFailed, CommandTimeout


def temps(d):
    return sorted(p.name for p in d.iterdir() if ".gpuhost-" in p.name)


def backups(d, name):
    return sorted(p.name for p in d.iterdir() if p.name.startswith(name + ".") and p.name.endswith(BACKUP_SUFFIX))


def test_truncated_stdin_is_never_renamed_into_place(tmp_path):
    target = tmp_path / "f"
    target.write_bytes(b"old content\n")
    new = b"x" * 100_000
    request = WriteRequest(str(target), len(new), hashlib.sha256(new).hexdigest(), backup=False)
    r = LocalConnection().run(request.command(), input=new[:5000], check=False)  # the channel "dropped"
    assert r.exit_code == 7 and "received 5000 of 100000 bytes" in r.stderr
    assert target.read_bytes() == b"old content\n"
    assert temps(tmp_path) == []


def test_wrong_checksum_is_refused_and_leaves_nothing(tmp_path):
    target = tmp_path / "f"
    target.write_bytes(b"old\n")
    with pytest.raises(CommandFailed, match="checksum mismatch"):
        LocalConnection().put_file(str(target), b"new\n", sha256="0" * 64)
    assert target.read_bytes() == b"old\n"
    assert temps(tmp_path) == []
    with pytest.raises(CommandFailed, match="checksum mismatch"):
        LocalConnection().put_file(str(tmp_path / "fresh"), b"new\n", sha256="1" * 64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_sigpipe_on_the_error_path_still_removes_the_temp_file(tmp_path):
    """Without a PIPE trap, writing the error message to a closed pipe kills sh before its EXIT trap."""
    target = tmp_path / "f"
    target.write_bytes(b"old\n")
    request = WriteRequest(str(target), 10, "0" * 64, backup=False)
    r, w = os.pipe()
    os.close(r)  # nobody reads stdout or stderr any more
    proc = subprocess.Popen(["/bin/sh", "-c", request.command()], stdin=subprocess.PIPE, stdout=w, stderr=w)
    os.close(w)
    proc.communicate(b"short")
    assert proc.returncode in (141, -signal.SIGPIPE, 7)
    assert target.read_bytes() == b"old\n"
    assert temps(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE])
def test_signal_mid_stream_removes_the_temp_file(tmp_path, sig):
    target = tmp_path / "f"
    target.write_bytes(b"old\n")
    data = b"y" * 1_000_000
    request = WriteRequest(str(target), len(data), hashlib.sha256(data).hexdigest(), backup=False)
    proc = subprocess.Popen(
        ["/bin/sh", "-c", request.command()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    proc.stdin.write(data[:1000])
    proc.stdin.flush()
    deadline = time.monotonic() + 5
    while not temps(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert temps(tmp_path), "the script made its temp file"
    found = subprocess.run(
        ["pgrep", "-s", str(proc.pid), "-f", "gpuhost-write"], check=False, capture_output=True, text=True
    )
    script_pid = int(found.stdout.split()[-1])
    os.kill(script_pid, sig)
    proc.stdin.close()
    proc.wait(5)
    assert target.read_bytes() == b"old\n"
    assert temps(tmp_path) == []


def test_new_private_file_is_never_readable_by_others(tmp_path):
    target = tmp_path / "secret"
    seen: set[int] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for p in tmp_path.iterdir():
                try:
                    seen.add(stat.S_IMODE(p.lstat().st_mode))
                except FileNotFoundError:
                    pass

    t = threading.Thread(target=watch)
    t.start()
    try:
        LocalConnection().put_file(str(target), io.BytesIO(os.urandom(1 << 20) * 48), mode=0o600)
    finally:
        stop.set()
        t.join()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert seen and all(m & 0o077 == 0 for m in seen), sorted(oct(m) for m in seen)


def test_write_order_sets_mode_before_content():
    from gpuhost.connection.write_script import WRITE_SCRIPT

    assert WRITE_SCRIPT.index('chmod "$mode"') < WRITE_SCRIPT.index('cat > "$tmp"')


def test_two_writes_within_one_second_keep_two_sortable_backups(tmp_path):
    conn = LocalConnection()
    target = tmp_path / "cfg"
    target.write_text("v1\n")
    r1 = conn.write_file(str(target), "v2\n")
    r2 = conn.write_file(str(target), "v3\n")
    assert r1.backup != r2.backup
    names = backups(tmp_path, "cfg")
    assert len(names) == 2
    assert [(tmp_path / n).read_text() for n in names] == ["v1\n", "v2\n"], "sorted by name == by age"


def test_same_stamp_gets_a_counter_not_an_overwrite(tmp_path):
    conn = LocalConnection()
    target = tmp_path / "cfg"
    target.write_text("v1\n")
    for text in ("v2\n", "v3\n"):
        data = text.encode()
        req = WriteRequest(str(target), len(data), hashlib.sha256(data).hexdigest())
        conn.run(req.command(stamp="20261201T000000.000000"), input=data)
    assert backups(tmp_path, "cfg") == [
        f"cfg.20261201T000000.000000-00{BACKUP_SUFFIX}",
        f"cfg.20261201T000000.000000-01{BACKUP_SUFFIX}",
    ]
    assert (tmp_path / f"cfg.20261201T000000.000000-01{BACKUP_SUFFIX}").read_text() == "v2\n"


def test_keep_limits_backups_per_file(tmp_path):
    conn = LocalConnection()
    target = tmp_path / "cfg"
    (tmp_path / "other").write_text("o\n")
    conn.write_file(str(tmp_path / "other"), "o2\n")
    target.write_text("0\n")
    for i in range(1, 6):
        conn.write_file(str(target), f"{i}\n", keep=2)
    names = backups(tmp_path, "cfg")
    assert [(tmp_path / n).read_text() for n in names] == ["3\n", "4\n"]
    assert len(backups(tmp_path, "other")) == 1, "another file's backups are not touched"


def test_symlink_is_written_through_or_refused(tmp_path):
    real = tmp_path / "real.conf"
    real.write_text("old\n")
    os.chmod(real, 0o640)
    link = tmp_path / "link.conf"
    link.symlink_to("real.conf")
    LocalConnection().write_file(str(link), "new\n")
    assert link.is_symlink() and os.readlink(link) == "real.conf"
    assert real.read_text() == "new\n" and stat.S_IMODE(real.stat().st_mode) == 0o640
    with pytest.raises(CommandFailed, match="symbolic link"):
        LocalConnection().write_file(str(link), "again\n", symlinks="refuse")
    assert real.read_text() == "new\n" and link.is_symlink()
    assert temps(tmp_path) == []


def test_put_file_round_trip_and_skip_when_already_there(tmp_path):
    conn = LocalConnection()
    src = tmp_path / "installer.run"
    src.write_bytes(os.urandom(3 << 20))
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    dest = tmp_path / "dest.run"
    first = conn.put_file(str(dest), src, mode=0o755, sha256=digest)
    assert first.sent and first.sha256 == digest and first.size == 3 << 20
    assert dest.read_bytes() == src.read_bytes() and stat.S_IMODE(dest.stat().st_mode) == 0o755
    inode = dest.stat().st_ino
    again = conn.put_file(str(dest), src, mode=0o755, sha256=digest)
    assert (again.sent, again.changed) == (False, False) and dest.stat().st_ino == inode
    assert conn.get_file(str(dest)) == src.read_bytes()
    out = conn.get_file(str(dest), tmp_path / "back")
    assert out.read_bytes() == src.read_bytes()


def test_put_file_repairs_a_partial_file(tmp_path):
    data = os.urandom(1 << 20)
    dest = tmp_path / "installer.run"
    dest.write_bytes(data[:1000])  # an interrupted earlier push
    r = LocalConnection().put_file(str(dest), io.BytesIO(data), mode=0o755, sha256=hashlib.sha256(data).hexdigest())
    assert r.sent and dest.read_bytes() == data


def test_put_file_from_an_unseekable_stream(tmp_path):
    r, w = os.pipe()
    payload = os.urandom(200_000)
    threading.Thread(target=lambda: (os.write(w, payload), os.close(w))).start()
    with os.fdopen(r, "rb") as stream:
        LocalConnection().put_file(str(tmp_path / "f"), stream)
    assert (tmp_path / "f").read_bytes() == payload


def test_get_file_of_a_missing_file_raises(tmp_path):
    with pytest.raises(CommandFailed, match="no such file"):
        LocalConnection().get_file(str(tmp_path / "nope"))


def test_timeout_raises_naming_command_and_seconds():
    with pytest.raises(CommandTimeout) as info:
        LocalConnection().run("sleep 5", timeout=0.3)
    assert "sleep 5" in str(info.value) and "0.3 s" in str(info.value)
    slow = LocalConnection(default_timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout):
        slow.run("sleep 5")
    assert time.monotonic() - t0 < 3
