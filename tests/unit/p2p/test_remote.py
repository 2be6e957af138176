"""Shipping the probe over a Connection: the local path for real, the pct path with a stand-in pct."""

from __future__ import annotations

import ctypes.util
import shutil
import stat
import sys
from pathlib import Path

import pytest

from gpuhost.connection.local import LocalConnection
from gpuhost.errors import ProbeError
from gpuhost.p2p.remote import ProbeOptions, run_probe

no_driver_only = pytest.mark.skipif(
    ctypes.util.find_library("cuda") is not None, reason="an NVIDIA driver is installed here"
)

FAKE_PCT = """#!/bin/sh
# Stand-in for Proxmox's pct: push/pull copy, 'exec CTID -- CMD...' runs CMD (the "CT" is this machine).
log="$FAKE_PCT_LOG"; echo "$@" >> "$log"
case "$1" in
  push) cp "$3" "$4" && chmod "${6:-644}" "$4" ;;
  pull) cp "$3" "$4" ;;
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
    bindir = _bin_with(tmp_path, [], {"pct": FAKE_PCT, **_python3_link(tmp_path)})
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_PCT_LOG", str(log))
    work = tmp_path / "tmp"
    work.mkdir()
    monkeypatch.setenv("TMPDIR", str(work))
    report = run_probe(LocalConnection("node1"), ProbeOptions(nccl=False), ctid=101)
    assert report.status == "cannot_run"
    calls = log.read_text().splitlines()
    pushes = [c for c in calls if c.startswith("push 101 ")]
    assert len(pushes) == 1 and "/gpuhost-tool." in pushes[0] and "probe.pyz" in pushes[0]
    assert any(c.startswith("exec 101 -- sh -c") and "python3" in c for c in calls)
    assert list(work.iterdir()) == []  # node and "CT" temporary directories are gone


def test_missing_python3_is_said_plainly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _bin_with(tmp_path, ["sh", "mktemp", "cat", "rm"]))
    with pytest.raises(ProbeError, match="python3 is not installed on the target"):
        run_probe(LocalConnection("node1"), ProbeOptions())


def test_ctid_on_a_machine_without_pct_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _bin_with(tmp_path, ["sh", "mktemp", "cat", "rm"]))
    with pytest.raises(ProbeError, match="--ctid needs a Proxmox VE node"):
        run_probe(LocalConnection("node1"), ProbeOptions(), ctid=101)


def test_probe_arguments() -> None:
    args = ProbeOptions(devices=[0, 1], staged=False, nccl=False).args()
    assert "--devices" in args and "0,1" in args and "--no-staged" in args
    assert args[args.index("--nccl") + 1] == "off"
