"""The serve part of the acceptance suite against a lab container with a server gpuhost launched (2 GPUs, the
SGLang stand-in): it passes, and it fails naming the check and its finding once the server is stopped."""

import json
import subprocess
import sys

import pytest

from tests.integration.lab.test_launch_sglang import CT, ct, gpuhost, serving_lab
from tests.lab_fixtures import lab_address

pytestmark = pytest.mark.integration
CHECKS = (
    "serve.unit",
    "serve.health",
    "serve.smoke",
    "serve.canary",
    "serve.logprobs",
    "serve.server-info",
    "serve.speed",
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    for handle in serving_lab(tmp_path_factory.mktemp("slab") / "state", lab_address(19, 9)):
        r = gpuhost(handle, "launch", "sglang")
        assert r.returncode == 0, r.stdout + r.stderr
        yield handle


def test_launched_server_passes_with_table_json_and_junit(lab, tmp_path):
    table = gpuhost(lab, "verify", "serve")
    assert table.returncode == 0, table.stdout + table.stderr
    assert "serve.canary" in table.stdout and "canary 4/4 correct" in table.stdout
    junit = tmp_path / "serve.xml"
    r = gpuhost(lab, "verify", "serve", "--ctid", str(CT), "--json", "--junit-xml", str(junit))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "gpuhost.verify/2" and doc["kind"] == "serve"
    assert {t["check"]: t["outcome"] for t in doc["tests"]} == {c: "PASS" for c in CHECKS}
    messages = {t["check"]: t["message"] for t in doc["tests"]}
    assert messages["serve.unit"] == "gpuhost-sglang.service active" and messages["serve.health"] == "/health 200"
    assert "tp_size=2" in messages["serve.server-info"] and "kv_cache_dtype=fp8_e4m3" in messages["serve.server-info"]
    xml = junit.read_text()
    assert f'tests="{len(CHECKS)}"' in xml and 'failures="0"' in xml and "serve.canary" in xml
    assert gpuhost(lab, "verify", "serve", "--ctid", "999").returncode == 2


def test_plain_pytest_runs_the_serve_part(lab):
    from tests.lab_fixtures import SRC

    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "gpuhost.acceptance.plugin", "-p", "no:cacheprovider", "-q"]
        + ["--gpuhost-inventory", str(lab.state_dir / "launch.yml"), "tests/acceptance/test_serve.py"],
        cwd=SRC.rsplit("/", 1)[0],
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "PYTHONPATH": SRC},
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"{len(CHECKS)} passed" in r.stdout


def test_a_stopped_server_fails_naming_the_unit_and_health(lab):
    assert ct(lab, "systemctl stop gpuhost-sglang").rc == 0
    try:
        r = gpuhost(lab, "verify", "serve", "--json")
        assert r.returncode == 1, r.stdout + r.stderr
        failed = {t["check"]: t["message"] for t in json.loads(r.stdout)["tests"] if t["outcome"] == "FAIL"}
        assert failed["serve.unit"] == "gpuhost-sglang.service is inactive"
        assert failed["serve.health"] == "no answer (gpuhost-sglang.service is inactive)"
        assert "serve.canary" in failed
        # the trap: a dead server's /server_info line read PASS; it is not read, and says why
        info = next(t for t in json.loads(r.stdout)["tests"] if "test_server_info" in t["test"])
        assert info["outcome"] == "SKIP", info
        assert info["message"] == (
            "serve.server-info: not read, the server is not healthy (gpuhost-sglang.service is inactive)"
        )
        table = gpuhost(lab, "verify", "serve")
        assert table.returncode == 1 and "gpuhost-sglang.service is inactive" in table.stdout
    finally:
        assert gpuhost(lab, "serve", "restart", "--all").returncode == 0
