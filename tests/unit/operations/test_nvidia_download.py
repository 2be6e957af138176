"""nvidia_driver's download: values reach the shell only as arguments (issue #12's injection); nvidia_installer's
download shows curl's meter."""

import hashlib
import logging
import os
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from gpuhost.connection.local import LocalConnection
from gpuhost.core.actions import RunCommand
from gpuhost.core.progress import CurlMeter, ProgressStream
from gpuhost.facts import files as file_facts
from gpuhost.operations import nvidia
from gpuhost.operations.nvidia import CHECKSUM_MISMATCH, DriverPin, NvidiaDriverArgs, NvidiaInstaller, download_command
from tests.support.scenario import ScenarioHost

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
    # the message names the pin to fix, where the operator wrote it
    assert r.stderr.rstrip().endswith("(vars.nvidia_driver.sha256 in the inventory: fix the pin or the url)")
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


def test_the_installer_cached_for_guests_downloads_with_curls_meter_shown(tmp_path, monkeypatch, caplog):
    """nvidia_installer (the node's cache for its containers, a VM's own cache): a missing installer is fetched by
    the real curl (from a file:// URL, as the lab serves them) and its meter becomes progress lines."""
    monkeypatch.setattr(nvidia, "CACHE_DIR", str(tmp_path / "cache"))
    served = os.urandom(3_000_000)
    (tmp_path / "NVIDIA.run").write_bytes(served)
    pin = DriverPin(version="580.95.05", url=f"file://{tmp_path}/NVIDIA.run", sha256=hashlib.sha256(served).hexdigest())
    path = nvidia.installer_path(pin.version)
    cached = NvidiaInstaller(pin).plan(ScenarioHost({(file_facts.exists, (path,)): True}))
    assert not cached.changes and cached.reason == f"{path} cached"
    plan = NvidiaInstaller(pin).plan(ScenarioHost({(file_facts.exists, (path,)): False}))
    (action,) = plan.actions
    assert isinstance(action, RunCommand) and action.progress == CurlMeter("driver download")
    stream = ProgressStream("vm110", action.progress)
    with caplog.at_level(logging.INFO, logger="gpuhost.progress"):
        r = LocalConnection().run(action.command, check=False, stdout_sink=stream)  # type: ignore[arg-type]
        kept = stream.close(r.exit_code == 0)
    assert r.exit_code == 0 and kept == ""
    said = [rec.getMessage() for rec in caplog.records]
    assert said[0] == "driver download: started"
    assert said[-1].startswith("driver download: 2.9 MiB downloaded, ") and said[-1].endswith("/s average")
    assert Path(path).read_bytes() == served
