"""Every ``--json`` output validates against its published schema (docs/schema), on real outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[3]
SCHEMAS = REPO / "docs" / "schema"
FIXTURES = REPO / "tests" / "fixtures"


def gpuhost(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUHOST_")}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**env, "PYTHONPATH": str(REPO / "src"), "XDG_CONFIG_HOME": str(cwd / "xdg")},
        timeout=120,
        check=False,
    )


def valid(name: str, out: str) -> dict:
    doc = json.loads(out)
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema)
    assert doc["schema"] == schema["$id"]
    return doc


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    (tmp_path / "key").write_text("k\n")
    (tmp_path / "key").chmod(0o600)
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "nodes:\n"
        "  pve1:\n    address: 127.0.8.1\n    ssh: {config_file: none, connect_timeout: 2}\n"
        "    containers:\n      200:\n"
        "        serve: {profile: glm5-nvfp4-tp8-sm120, host: 127.0.8.11, port: 30000, api_key_file: key}\n"
        "  ctl:\n    address: 127.0.0.1\n    connection: local\n"
        "vars:\n  gpu_path: none\n"
    )
    return inv


def test_shell(inventory: Path, tmp_path: Path) -> None:
    r = gpuhost("shell", "ctl", "-i", str(inventory), "--json", "--", "echo hi; echo oops >&2", cwd=tmp_path)
    doc = valid("shell", r.stdout)
    assert doc["hosts"]["ctl"]["stdout"] == "hi\n" and doc["hosts"]["ctl"]["stderr"] == "oops\n"


def test_serve_status_of_an_unreachable_node(inventory: Path, tmp_path: Path) -> None:
    r = gpuhost("serve", "status", "-i", str(inventory), "--json", cwd=tmp_path)
    assert r.returncode == 1
    doc = valid("serve-status", r.stdout)
    assert doc["servers"][0]["target"] == "pve1/CT 200" and "cannot connect" in doc["servers"][0]["error"]


def test_verify_host_of_an_unreachable_node(inventory: Path, tmp_path: Path) -> None:
    r = gpuhost("verify", "host", "-i", str(inventory), "-l", "pve1", "--json", cwd=tmp_path)
    doc = valid("verify", r.stdout)
    assert doc["exit_code"] == 1 and {t["outcome"] for t in doc["tests"]} == {"ERROR"}


@pytest.mark.parametrize(
    "log", ["sglang-19408-glm-moe-dsa-keyerror.log", "sglang-5285-capture-oom.log", "sglang-19712-dsv32-running.log"]
)
def test_doctor_sglang_log(log: str, tmp_path: Path) -> None:
    r = gpuhost("doctor", "sglang-log", "--json", str(FIXTURES / "sglang" / "logs" / log), cwd=tmp_path)
    valid("doctor-sglang-log", r.stdout)


@pytest.mark.parametrize("log", sorted(p.name for p in (FIXTURES / "host" / "dmesg").glob("*.txt")))
def test_doctor_dmesg(log: str, tmp_path: Path) -> None:
    r = gpuhost("doctor", "dmesg", "--json", str(FIXTURES / "host" / "dmesg" / log), cwd=tmp_path)
    valid("doctor-dmesg", r.stdout)


def test_config(tmp_path: Path) -> None:
    (tmp_path / "gpuhost.toml").write_text("forks = 3\n")
    doc = valid("config", gpuhost("config", "--json", cwd=tmp_path).stdout)
    assert {"key": "forks", "env": "GPUHOST_FORKS", "value": "3", "source": f"{tmp_path}/gpuhost.toml:1"} in doc[
        "settings"
    ]
