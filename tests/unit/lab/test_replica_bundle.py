"""The lab's bundle reader refuses a bad or hostile bundle (exit 2) before anything is started or written."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gpuhost.lab.replica import bundle as reader
from gpuhost.lab.replica.bundle import BundleError, load

GRUB = b'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on"\n'


def _entry(path: str, data: bytes, exit_code: int = 0) -> dict[str, object]:
    return {
        "path": path,
        "command": "cat",
        "exit": exit_code,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _manifest(files: dict[str, bytes], schema: str = "gpuhost-capture/1") -> bytes:
    doc = {"schema": schema, "node": "node1", "files": [_entry(p, d) for p, d in files.items()]}
    return json.dumps(doc).encode()


def _tar(path: Path, members: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tar.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tar.addfile(info, io.BytesIO(m[1]))
    return path


def _good(tmp_path: Path, **extra: bytes) -> list[tarfile.TarInfo | tuple[str, bytes]]:
    files = {"files/fs/etc/default/grub": GRUB, **extra}
    return [("manifest.json", _manifest(files)), *files.items()]


def test_a_good_bundle_is_read(tmp_path: Path) -> None:
    b = load(_tar(tmp_path / "b.tar.gz", _good(tmp_path)))
    assert b.text("fs/etc/default/grub") == GRUB.decode()
    assert b.manifest["node"] == "node1"


def _refused(path: Path) -> str:
    with pytest.raises(BundleError) as exc:
        load(path)
    assert exc.value.exit_code == 2
    assert str(path) in exc.value.message
    return exc.value.message


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../evil", "leaves the bundle"),
        ("files/../../evil", "leaves the bundle"),
        ("/etc/cron.d/evil", "absolute name"),
        ("files/./x", "not in normal form"),
    ],
)
def test_a_name_that_leaves_the_bundle_is_refused(tmp_path: Path, name: str, why: str) -> None:
    assert why in _refused(_tar(tmp_path / "b.tar.gz", [*_good(tmp_path), (name, b"x")]))


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        (tarfile.SYMTYPE, "is a link"),
        (tarfile.LNKTYPE, "is a link"),
        (tarfile.CHRTYPE, "device or special file"),
        (tarfile.BLKTYPE, "device or special file"),
        (tarfile.FIFOTYPE, "device or special file"),
    ],
)
def test_links_and_devices_are_refused(tmp_path: Path, kind: bytes, said: str) -> None:
    info = tarfile.TarInfo("files/fs/etc/kernel/cmdline")
    info.type = kind
    info.linkname = "/etc/shadow" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
    assert said in _refused(_tar(tmp_path / "b.tar.gz", [*_good(tmp_path), info]))


def test_a_huge_member_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    # 17 MiB of zeros: a few kB compressed, over the 16 MiB per-file budget
    path = tmp_path / "bomb.tar.gz"
    with gzip.open(path, "wb") as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        info = tarfile.TarInfo("files/cmd/lspci-nnvv")
        info.size = 17 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    assert path.stat().st_size < 200_000
    assert "over the 16777216-byte budget" in _refused(path)


def test_the_total_budget_is_counted_while_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "MAX_TOTAL", 1000)
    members = _good(tmp_path, **{f"files/cmd/x{i}": bytes(300) for i in range(5)})
    assert "more than 1000 bytes uncompressed" in _refused(_tar(tmp_path / "b.tar.gz", members))


def test_a_wrong_schema_version_is_refused(tmp_path: Path) -> None:
    files = {"files/fs/etc/default/grub": GRUB}
    path = _tar(tmp_path / "b.tar.gz", [("manifest.json", _manifest(files, "gpuhost-capture/2")), *files.items()])
    assert "field schema is 'gpuhost-capture/2'; this gpuhost reads 'gpuhost-capture/1'" in _refused(path)


def test_a_manifest_that_does_not_match_the_files_is_refused(tmp_path: Path) -> None:
    files = {"files/fs/etc/default/grub": GRUB}
    tampered = [("manifest.json", _manifest(files)), ("files/fs/etc/default/grub", GRUB + b"GRUB_TIMEOUT=0\n")]
    assert "size or sha256 does not match" in _refused(_tar(tmp_path / "a.tar.gz", tampered))
    missing = [("manifest.json", _manifest(files))]
    assert "is not in the bundle" in _refused(_tar(tmp_path / "b.tar.gz", missing))
    extra = [*_good(tmp_path), ("files/unlisted", b"x")]
    assert "files/unlisted is in the bundle but not in manifest.json" in _refused(_tar(tmp_path / "c.tar.gz", extra))
    assert "no manifest.json" in _refused(_tar(tmp_path / "d.tar.gz", list(files.items())))


def test_something_that_is_not_a_tar_gz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.tar.gz"
    path.write_bytes(b"PK\x03\x04 a zip file")
    assert "not a readable tar.gz" in _refused(path)


@pytest.mark.parametrize("case", ["schema", "huge", "traversal"])
def test_lab_up_from_a_bad_bundle_exits_2_naming_the_fault_and_starts_nothing(tmp_path: Path, case: str) -> None:
    files = {"files/fs/etc/default/grub": GRUB}
    path = tmp_path / "bad.capture.tar.gz"
    if case == "schema":
        _tar(path, [("manifest.json", _manifest(files, "gpuhost-capture/2")), *files.items()])
        said = "field schema is 'gpuhost-capture/2'"
    elif case == "huge":
        with gzip.open(path, "wb") as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
            info = tarfile.TarInfo("files/cmd/lspci-nnvv")
            info.size = 17 << 20
            tar.addfile(info, io.BytesIO(bytes(info.size)))
        said = "over the 16777216-byte budget"
    else:
        _tar(path, [*_good(tmp_path), ("files/../../etc/cron.d/evil", b"* * * * * root true\n")])
        said = "leaves the bundle"
    state = tmp_path / "state"
    # a documentation address (RFC 5737): even a reader that let the bundle through could start no node on it
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src"), "NO_COLOR": "1", "COLUMNS": "200"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuhost",
            "lab",
            "up",
            "--from-capture",
            str(path),
            "--address",
            "192.0.2.1",
            "--state-dir",
            str(state),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert said in r.stdout + r.stderr and str(path) in r.stdout + r.stderr
    assert not state.exists()
