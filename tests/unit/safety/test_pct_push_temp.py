"""A ``pct push`` killed half way leaves its full-size temp beside the target in the CT; the next write of that
target removes it (issue 31, item 7). The script is the one :class:`gpuhost.connection.pct.PctConnection` runs in
the CT to name the temp."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpuhost.connection.write_script import TEMP_NAME_SCRIPT


def _temp_name(target: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", TEMP_NAME_SCRIPT, "gpuhost-temp", str(target), "follow"], capture_output=True, text=True
    )


def test_a_killed_push_temp_of_the_target_is_removed_before_a_new_one(tmp_path: Path) -> None:
    target = tmp_path / "NVIDIA-Linux-x86_64-580.95.05.run"
    stale = tmp_path / f".{target.name}.gpuhost-Ab12Cd"
    stale.write_bytes(b"\0" * 1_000_000)
    other = tmp_path / ".other.run.gpuhost-Zz99Yy"  # another file's temp is not this write's business
    other.write_bytes(b"x")
    r = _temp_name(target)
    assert r.returncode == 0, r.stderr
    fresh = Path(r.stdout.strip())
    assert fresh.parent == tmp_path and fresh.name.startswith(f".{target.name}.gpuhost-")
    assert not stale.exists() and fresh.exists() and other.exists()


def test_with_no_stale_temp_it_just_names_one(tmp_path: Path) -> None:
    r = _temp_name(tmp_path / "f")
    assert r.returncode == 0 and Path(r.stdout.strip()).exists(), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir())[0].startswith(".f.gpuhost-")
