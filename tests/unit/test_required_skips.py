"""tests/conftest.py's guards, run on a small tree of their own: a skip in a required module fails the session,
a skip elsewhere does not; a test that hangs is stopped by its timeout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def run(tmp_path: Path, files: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 120\nmarkers =\n    integration: x\n    faults: x\n")
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


SKIPPING = "import pytest\n\npytestmark = pytest.mark.skipif(True, reason='sudo is not installed')\n\n\ndef test_x():\n    pass\n"


def test_a_skip_in_a_required_module_fails_the_session(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {"tests/integration/test_operator_become.py": SKIPPING, "tests/test_ok.py": "def test_ok():\n    pass\n"},
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "required modules skipped" in r.stdout
    assert "tests/integration/test_operator_become.py::test_x: Skipped: sudo is not installed" in r.stdout


def test_a_skip_elsewhere_passes(tmp_path: Path) -> None:
    r = run(tmp_path, {"tests/integration/test_other.py": SKIPPING})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "required modules skipped" not in r.stdout and "1 skipped" in r.stdout


def test_a_failure_stays_a_failure(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {"tests/integration/lab/test_fleet.py": SKIPPING, "tests/test_bad.py": "def test_bad():\n    assert 0\n"},
    )
    assert r.returncode == 1 and "1 failed" in r.stdout and "required modules skipped" in r.stdout


def test_a_hanging_test_is_stopped_by_its_timeout(tmp_path: Path) -> None:
    hang = "import time\nimport pytest\n\n\n@pytest.mark.timeout(1)\ndef test_hang():\n    time.sleep(60)\n"
    r = run(tmp_path, {"tests/test_hang.py": hang})
    assert r.returncode == 1 and "Timeout" in r.stdout, r.stdout


def test_the_lab_markers_get_the_longer_timeouts(tmp_path: Path) -> None:
    probe = (
        "import pytest\n\n\n@pytest.mark.faults\ndef test_f(request):\n"
        "    assert request.node.get_closest_marker('timeout').args == (1800,)\n\n\n"
        "@pytest.mark.integration\ndef test_i(request):\n"
        "    assert request.node.get_closest_marker('timeout').args == (900,)\n\n\n"
        "@pytest.mark.integration\n@pytest.mark.timeout(5)\ndef test_own(request):\n"
        "    assert request.node.get_closest_marker('timeout').args == (5,)\n"
    )
    r = run(tmp_path, {"tests/test_markers.py": probe})
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout
