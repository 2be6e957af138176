"""`gpuhost doctor` on a serving lab node (provisioned by gpuhost, the server launched): a NaN crash in the serving
journal is the top finding, and the relaunch doctor prints, run once the cause is gone, clears it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.integration.lab.test_launch_sglang import API_KEY, CT, ct, fault, gpuhost, serving_lab
from tests.lab_fixtures import LabHandle, lab_address

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def serve_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    for handle in serving_lab(tmp_path_factory.mktemp("doctorserve") / "state", lab_address(17, 1)):
        r = gpuhost(handle, "provision", "lxc", "--allow-reboot", "--allow-restart")
        assert r.returncode == 0, r.stdout + r.stderr
        r = gpuhost(handle, "launch", "sglang")
        assert r.returncode == 0, r.stdout + r.stderr
        yield handle


def doctor(lab: LabHandle, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", "doctor", "-i", str(lab.state_dir / "launch.yml"), *extra],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )


def doctor_json(lab: LabHandle) -> tuple[int, dict]:
    r = doctor(lab, "--json")
    assert r.stdout.startswith("{"), r.stdout + r.stderr
    return r.returncode, json.loads(r.stdout)


def test_a_nan_crash_in_the_journal_is_the_top_finding_and_a_relaunch_clears_it(serve_lab: LabHandle) -> None:
    code, doc = doctor_json(serve_lab)
    assert code == 0, doc["findings"]
    assert doc["round_trips"] == 3  # the host's batched read, CT 230's, the serve probe
    fault(serve_lab, "nan-on-first-decode")
    body = json.dumps({"model": "glm-5", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7})
    address = serve_lab.node("sgl").address
    ct(
        serve_lab,
        f"curl -s -m 30 -H 'Authorization: Bearer {API_KEY}' -H 'Content-Type: application/json' "
        f"-d {shlex.quote(body)} http://{address}:30000/v1/chat/completions; true",
    )
    code, doc = doctor_json(serve_lab)
    assert code == 1
    top = doc["findings"][0]
    assert (top["check"], top["subject"], top["level"]) == ("sglang.log.nan-in-sampling", f"sgl/CT {CT}", "FAIL")
    assert any("probability tensor contains either `inf`, `nan` or element < 0" in e for e in top["evidence"])
    assert (
        top["command"]
        == f"gpuhost launch sglang -i {serve_lab.state_dir / 'launch.yml'} --limit sgl --ctid {CT} --allow-restart"
    )
    text = doctor(serve_lab)
    sys.stdout.write(text.stdout)  # the docs' example (pytest -s)

    fault(serve_lab, None)  # the cause gone (a fixed kernel, another backend), the relaunch is a new start
    words = shlex.split(top["command"])
    r = subprocess.run([sys.executable, "-m", "gpuhost", *words[1:]], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    _code, after = doctor_json(serve_lab)
    assert "sglang.log.nan-in-sampling" not in [f["check"] for f in after["findings"]], after["findings"]
