"""The lab's own SGLang data re-extracted from the real PyPI wheel and compared with what is committed (needs PyPI):
the stand-in's log lines and error texts (scripts/extract_sglang_texts.py) and its parser's flag table
(scripts/extract_sglang_flags.py, into the lab's data/, not the product's serve/flags/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.lab.sglang import wheels

ROOT = Path(__file__).resolve().parents[3]
VERSION = "0.5.8.post1"  # the smallest stand-in version's wheel (pure Python, ~4.4 MB)


@pytest.fixture(scope="module")
def wheel(request: pytest.FixtureRequest) -> Path:
    cache = Path(request.config.cache.mkdir("sglang-wheels"))
    found = sorted(cache.glob(f"sglang-{VERSION}-*.whl"))
    if found:
        return found[0]
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
         "--platform", "manylinux_2_34_x86_64", "--platform", "any", "-q", "-d", str(cache), f"sglang=={VERSION}"],
        check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return min(cache.glob(f"sglang-{VERSION}-*.whl"))


def _run(*args: str) -> None:
    proc = subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_reextracted_texts_equal_the_committed_ones(wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "texts.json"
    _run(str(ROOT / "scripts" / "extract_sglang_texts.py"), VERSION, "--wheel", str(wheel), "--out", str(out))
    assert out.read_text() == wheels.texts_file(VERSION).read_text()


def test_reextracted_flag_table_equals_the_labs_copy(
    wheel: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out = tmp_path / "flags.json"
    deps = Path(request.config.cache.mkdir("sglang-wheels")) / "deps"
    _run(str(ROOT / "scripts" / "extract_sglang_flags.py"), VERSION, "--wheel", str(wheel), "--deps", str(deps),
         "--out", str(out))  # fmt: skip
    assert out.read_text() == wheels.flags_file(VERSION).read_text()
