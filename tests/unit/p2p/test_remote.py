"""Shipping the probe over a Connection: the local path for real, the pct path with a stand-in pct."""

from __future__ import annotations

import ctypes.util
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from gpuhost.connection.local import LocalConnection
from gpuhost.errors import ProbeError
from gpuhost.p2p.remote import ProbeOptions, container_script, run_probe

no_driver_only = pytest.mark.skipif(ctypes.util.find_library("cuda") is not None,
                                    reason="an NVIDIA driver is installed here")

FAKE_PCT = """#!/bin/sh
# Stand-in for Proxmox's pct: 'push CTID SRC DST' copies, 'exec CTID -- CMD...' runs CMD.
log="$FAKE_PCT_LOG"; echo "$@" >> "$log"
case "$1" in
  push) cp "$3" "$4" ;;
  exec) shift 3; exec "$@" ;;
esac
"""


def _bin_with(tmp_path: Path, tools: list[str], extra: dict[str, str] | None = None) -> str:
    """A PATH holding only ``tools`` (symlinks) plus scripts in ``extra``."""
    d = tmp_path / "bin"
    d.mkdir()
    for t in tools:
        found = shutil.which(t)
        assert found, t
        (d / t).symlink_to(found)
    for name, body in (extra or {}).items():
        p = d / name
        p.write_text(body)
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(d)


def _python3_link(tmp_path: Path) -> dict[str, str]:
    return {"python3": f'#!/bin/sh\nexec {sys.executable} -I "$@"\n'}


@no_driver_only
def test_local_run_returns_the_cannot_run_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    report = run_probe(LocalConnection(), ProbeOptions(nccl=False))
    assert report.status == "cannot_run"
    assert any("libcuda.so.1" in e.message for e in report.errors)
    assert list(tmp_path.iterdir()) == []  # the temporary directory is gone


@no_driver_only
def test_container_path_pushes_and_execs_then_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "pct.log"
    path = _bin_with(tmp_path, ["sh", "mktemp", "cat", "rm", "cp"], {"pct": FAKE_PCT, **_python3_link(tmp_path)})
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("FAKE_PCT_LOG", str(log))
    report = run_probe(LocalConnection("node1"), ProbeOptions(nccl=False), ctid=101)
    assert report.status == "cannot_run"
    calls = log.read_text().splitlines()
    assert calls[0].startswith("push 101 ") and calls[0].endswith(" /tmp/gpuhost-probe-101.pyz")
    assert calls[1].startswith("exec 101 -- sh -c")
    assert not os.path.exists("/tmp/gpuhost-probe-101.pyz")


def test_missing_python3_is_said_plainly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _bin_with(tmp_path, ["sh", "mktemp", "cat", "rm"]))
    with pytest.raises(ProbeError, match="python3 is not installed on the target"):
        run_probe(LocalConnection("node1"), ProbeOptions())


def test_ctid_on_a_machine_without_pct_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _bin_with(tmp_path, ["sh", "mktemp", "cat", "rm"]))
    with pytest.raises(ProbeError, match="--ctid needs a Proxmox VE node"):
        run_probe(LocalConnection("node1"), ProbeOptions(), ctid=101)


def test_probe_arguments_are_quoted_into_the_script() -> None:
    script = container_script(105, ProbeOptions(devices=[0, 1], staged=False, nccl=False).args())
    assert "pct push 105" in script and "--devices 0,1" in script and "--no-staged" in script
    assert "--nccl off" in script
