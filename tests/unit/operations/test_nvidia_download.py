"""nvidia_driver's download: values reach the shell only as arguments (issue #12's injection)."""

import hashlib
import os
import stat

import pytest
from pydantic import ValidationError

from gpuhost.connection.local import LocalConnection
from gpuhost.operations import nvidia
from gpuhost.operations.nvidia import CHECKSUM_MISMATCH, NvidiaDriverArgs, download_command

PAYLOAD_URL = "https://example.invalid/NVIDIA.run?$(cd;touch${IFS}pwned)`touch${IFS}pwned2`"

FAKE_CURL = """#!/bin/sh
# writes SERVED to the -o file, whatever the URL
while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift ;; esac; shift; done
printf '%s' "$SERVED" > "$out"
"""


@pytest.fixture
def fake_curl(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "curl").write_text(FAKE_CURL)
    (bindir / "curl").chmod(0o755 | stat.S_IXUSR)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(nvidia, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _args(url: str, served: bytes) -> NvidiaDriverArgs:
    return NvidiaDriverArgs(version="580.95.05", url=url, sha256=hashlib.sha256(served).hexdigest())


def test_checksum_mismatch_does_not_run_the_url(fake_curl, monkeypatch):
    monkeypatch.setenv("SERVED", "tampered")
    args = _args(PAYLOAD_URL, b"the real installer")
    r = LocalConnection().run(download_command(args), check=False)
    assert r.exit_code == CHECKSUM_MISMATCH
    assert f"checksum mismatch for {PAYLOAD_URL}" in r.stderr, "the URL is printed as data"
    created = [p.name for d in (fake_curl, fake_curl / "home") for p in d.iterdir()]
    assert "pwned" not in created and "pwned2" not in created
    assert list((fake_curl / "cache").iterdir()) == [], "the partial download is removed"


def test_good_download_lands_and_is_reused(fake_curl, monkeypatch):
    monkeypatch.setenv("SERVED", "the real installer")
    args = _args("https://example.invalid/NVIDIA-Linux-x86_64-580.95.05.run", b"the real installer")
    LocalConnection().run(download_command(args))
    path = fake_curl / "cache" / "NVIDIA-Linux-x86_64-580.95.05.run"
    assert path.read_bytes() == b"the real installer"
    monkeypatch.setenv("SERVED", "other")  # a second run does not download again
    LocalConnection().run(download_command(args))
    assert path.read_bytes() == b"the real installer"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://x/y.run",
        "https://x/a b.run",
        "https://x/a\n.run",
        "https://x/\x07",
        "https://x/a\tb",
        "javascript:alert(1)",
        "https://",
    ],
)
def test_bad_urls_are_refused(url):
    with pytest.raises(ValidationError):
        NvidiaDriverArgs(version="580.95.05", url=url, sha256="a" * 64)
