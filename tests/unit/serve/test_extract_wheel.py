"""Re-extract the flag tables from the real PyPI wheels and compare with the committed tables, byte for byte.

The wheels and the extractor's few real dependencies are the ones scripts/setup.sh cached
(``/var/cache/gpuhost/sglang-wheels``, ``/var/cache/gpuhost/sglang-flag-deps``; ``GPUHOST_SGLANG_WHEEL_CACHE`` and
``GPUHOST_SGLANG_FLAG_DEPS`` move them): nothing is downloaded while the tests run. 0.5.9 is the oldest table;
0.5.23 is the one the shipped profiles pin.
"""

import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "extract_sglang_flags.py"
VERSIONS = ("0.5.9", "0.5.23")
WHEELS = Path(os.environ.get("GPUHOST_SGLANG_WHEEL_CACHE", "/var/cache/gpuhost/sglang-wheels"))
DEPS = Path(os.environ.get("GPUHOST_SGLANG_FLAG_DEPS", "/var/cache/gpuhost/sglang-flag-deps"))
REAL_DEPS = ("msgspec", "packaging", "dill")  # what the extractor imports for real (its REAL_DEPS)


def cached_wheel(version: str) -> Path:
    found = sorted(WHEELS.glob(f"sglang-{version}-*.whl"))
    assert found, f"no sglang {version} wheel in {WHEELS}: run scripts/setup.sh (the tests download nothing)"
    return found[0]


@pytest.mark.parametrize("version", VERSIONS)
def test_reextracted_table_equals_committed(version: str, tmp_path: Path):
    wheel = cached_wheel(version)
    assert all((DEPS / name).is_dir() for name in REAL_DEPS), f"{DEPS} lacks {REAL_DEPS}: run scripts/setup.sh"
    out = tmp_path / "table.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), version, "--wheel", str(wheel), "--deps", str(DEPS), "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    committed = (resources.files("gpuhost.serve") / "flags" / f"sglang-{version}.json").read_text()
    assert out.read_text() == committed
