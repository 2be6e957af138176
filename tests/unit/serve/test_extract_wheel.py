"""Re-extract one version from the real PyPI wheel and compare with the committed table (needs PyPI)."""

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "extract_sglang_flags.py"
VERSION = "0.5.9"  # the smallest wheel among the pinned versions (pure Python, ~5 MB)


@pytest.fixture(scope="module")
def wheel_dir(request: pytest.FixtureRequest) -> Path:
    return Path(request.config.cache.mkdir("sglang-wheels"))


def _wheel(cache: Path) -> Path:
    found = sorted(cache.glob(f"sglang-{VERSION}-*.whl"))
    if found:
        return found[0]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--platform",
            "manylinux_2_34_x86_64",
            "--platform",
            "any",
            "-q",
            "-d",
            str(cache),
            f"sglang=={VERSION}",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return min(cache.glob(f"sglang-{VERSION}-*.whl"))


def test_reextracted_table_equals_committed(wheel_dir: Path, tmp_path: Path):
    wheel = _wheel(wheel_dir)
    out = tmp_path / "table.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            VERSION,
            "--wheel",
            str(wheel),
            "--deps",
            str(wheel_dir / "deps"),
            "--out",
            str(out),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    committed = (resources.files("gpuhost.serve") / "flags" / f"sglang-{VERSION}.json").read_text()
    assert json.loads(out.read_text()) == json.loads(committed)
    assert out.read_text() == committed
