"""``gpuhost launch sglang --group`` on a 3-node lab: three stand-in replicas (one container per node) and the
**real** SGLang Model Gateway (``smg`` 1.13.0 from the lab's offline index) on the first node, from one command;
requests through the gateway spread over the replicas; a stopped replica is taken out while the endpoint keeps
answering and ``verify serve --group`` names it; re-running converges with ``changed=0``; a removed replica
leaves the gateway without a restart.

Lab networking: nodes share the host's network namespace on their own 127.x addresses, and a container shares its
node's network, so each replica's ``serve.host`` is its node's address and the gateway on another node reaches it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gpuhost.lab import manager
from gpuhost.lab.pypi.seed import cached_wheels
from gpuhost.lab.sglang.model import NODE_DIR
from gpuhost.lab.spec import NodeSpec
from tests.integration.lab.test_gpu import MODEL as GPU_MODEL
from tests.integration.lab.test_gpu import OLD, fetch_installer, install_host_driver, ok
from tests.lab_fixtures import FAST_SERVING_VARS, LabHandle, gpuhost_cli, lab_address, start_lab

CT = 240
NODES = ("f1", "f2", "f3")
API_KEY = "sk-fleet-test-3b6c0e19"
UNIT = "gpuhost-smg-glm5.service"

PROFILES = """
profiles:
  - name: lab-glm5-tp1
    description: the shipped glm5-nvfp4-tp8-sm120 at TP1 (each lab node has 1 GPU)
    pins: {sglang: "0.5.23", transformers: "5.19.0", flashinfer: "0.7.2", torch: "2.14.1", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 1
    tp_size: 1
    flags:
      --quantization: modelopt_fp4
      --kv-cache-dtype: fp8_e4m3
      --served-model-name: glm-5
      --enable-metrics: true
    env: {NCCL_IB_DISABLE: "1"}
"""

pytestmark = pytest.mark.skipif(
    not any(w.name.startswith("smg-1.13.0-") for w in cached_wheels()),
    reason="the real smg wheel is not in the lab's wheel cache (scripts/setup.sh fetches it)",
)


def _prepare(handle: LabHandle, node: str) -> None:
    ok(handle, node, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q dkms proxmox-headers-$(uname -r)", 300)
    assert install_host_driver(handle, node, OLD).rc == 0
    ok(handle, node, "test -c /dev/nvidia-uvm || nvidia-modprobe -c0 -u")
    ok(
        handle,
        node,
        f"pct create {CT} local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname llm "
        "--memory 8192 --rootfs local-lvm:8 --unprivileged 0 && "
        f"pct set {CT} --dev0 /dev/nvidia0,gid=44 --dev1 /dev/nvidiactl,gid=44 --dev2 /dev/nvidia-uvm,gid=44 && "
        f"pct start {CT}",
    )
    path = fetch_installer(handle, node, OLD)
    ok(
        handle,
        node,
        f"pct exec {CT} -- mkdir -p /var/cache/gpuhost && pct push {CT} {path} {path} && "
        f"pct exec {CT} -- sh {path} --silent --no-x-check --no-nouveau-check --no-kernel-modules",
        timeout=300,
    )
    ok(
        handle,
        node,
        f"pct exec {CT} -- sh -c 'mkdir -p /etc/gpuhost-lab/sglang && echo 0.1 > /etc/gpuhost-lab/sglang/delay_scale'",
    )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    state = tmp_path_factory.mktemp("fleetlab") / "state"
    specs = [
        NodeSpec(n, lab_address(15, i + 1), boot="grub", cpu="amd", pve=8, gpus=1, gpu_model=GPU_MODEL, numa=1)
        for i, n in enumerate(NODES)
    ]
    handle = start_lab(state, specs)
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda n: _prepare(handle, n), NODES))
        write_inventory(handle, NODES)
        yield handle
    finally:
        handle.close()
        manager.down(state)


def write_inventory(lab: LabHandle, replicas: tuple[str, ...]) -> Path:
    yaml = YAML(typ="safe", pure=True)
    doc: dict[str, Any] = yaml.load(lab.inventory.read_text())
    (lab.state_dir / "profiles.yml").write_text(PROFILES)
    key = lab.state_dir / "api-key"
    key.write_text(API_KEY + "\n")
    key.chmod(0o600)
    for n in NODES:
        doc["nodes"][n]["containers"] = {
            CT: {
                "hostname": "llm",
                "serve": {
                    "profile": "lab-glm5-tp1",
                    "model": "/srv/models/GLM-5-NVFP4",
                    "model_node_dir": NODE_DIR,
                    "host": lab.node(n).address,
                    "port": 30000,
                    "api_key_file": "api-key",
                },
            }
        }
    doc["serving"] = {
        "groups": {
            "glm5": {
                "replicas": [{"node": n, "ctid": CT} for n in replicas],
                "gateway": {
                    "node": "f1",
                    "port": 30080,
                    "policy": "round_robin",
                    "prometheus_port": 29000,
                    "health": {"interval_secs": 1, "timeout_secs": 2, "failure_threshold": 1},
                },
            }
        }
    }
    doc["vars"].update(
        sglang_profile_dirs=[str(lab.state_dir / "profiles.yml")],
        **FAST_SERVING_VARS,
    )
    path = lab.state_dir / "fleet.yml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def gpuhost(lab: LabHandle, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return gpuhost_cli(lab.state_dir / "fleet.yml", *args, timeout=timeout)


def through_gateway(lab: LabHandle, path: str = "/v1/chat/completions") -> tuple[int, str]:
    body = json.dumps({"model": "glm-5", "messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 4})
    r = lab.run(
        "f1",
        f"curl -s -o /tmp/gw.out -w '%{{http_code}}' -H 'Authorization: Bearer {API_KEY}' "
        f"-H 'Content-Type: application/json' -d {shlex.quote(body)} http://{lab.node('f1').address}:30080{path}; "
        "echo; cat /tmp/gw.out",
    )
    code, _, text = r.stdout.partition("\n")
    return int(code or 0), text


def gateway_started(lab: LabHandle) -> str:
    return lab.run("f1", f"systemctl show -p ExecMainStartTimestamp,MainPID {UNIT}").stdout


def test_check_diff_shows_the_gateway_command_and_changes_nothing(fleet: LabHandle) -> None:
    r = gpuhost(fleet, "launch", "sglang", "--group", "glm5", "--check", "--diff")
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    # the key stays out of argv: smg's entry point is called with it from the 0600 environment file
    assert "/opt/gpuhost/smg/1.13.0/venv/bin/python -c 'import os, sys; from smg.cli import main;" in out
    assert "' launch --host " + fleet.node("f1").address + " --port 30080" in out
    assert "--policy round_robin" in out and "--health-check-interval-secs 1" in out
    # the env file holds the key: its diff shows the line with the key masked
    assert "SMG_API_KEY=********" in out and API_KEY not in out + r.stderr
    assert ok(fleet, "f1", "test -e /opt/gpuhost/smg && echo yes || echo no").strip() == "no"


def test_one_command_brings_up_three_replicas_and_the_real_gateway(fleet: LabHandle) -> None:
    r = gpuhost(fleet, "launch", "sglang", "--group", "glm5")
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    assert text.count("canary 4/4 correct") == 3, text  # each replica proven on its own
    assert "3/3 replicas healthy" in text, text
    assert API_KEY not in text
    # the real gateway: smg 1.13.0 from the offline index, a systemd service
    v = ok(
        fleet,
        "f1",
        "/opt/gpuhost/smg/1.13.0/venv/bin/python -c 'import importlib.metadata as m; print(m.version(\"smg\"))'",
    )
    assert v.strip() == "1.13.0"
    assert ok(fleet, "f1", f"systemctl is-active {UNIT}").strip() == "active"
    assert ok(fleet, "f1", "stat -c %a /etc/gpuhost/smg-glm5.env").strip() == "600"
    # the key reaches smg (a request without it is refused) but never its argv, which every user can read
    gateway_argv = ok(fleet, "f1", "ps -ww -eo args | grep -i '[s]mg' || true")
    assert gateway_argv.strip() and API_KEY not in gateway_argv, gateway_argv
    launch = ok(fleet, "f1", "cat /opt/gpuhost/smg/glm5/launch.sh")
    exec_line = next(line for line in launch.splitlines() if line.startswith("exec "))
    assert "SMG_API_KEY" in exec_line and '"$SMG_API_KEY"' not in exec_line, exec_line
    body = json.dumps({"model": "glm-5", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
    anon = ok(
        fleet,
        "f1",
        f"curl -s -o /dev/null -w '%{{http_code}}' -H 'Content-Type: application/json' -d {shlex.quote(body)} "
        f"http://{fleet.node('f1').address}:30080/v1/chat/completions",
    )
    assert anon.strip() == "401", anon
    code, body = through_gateway(fleet)
    assert code == 200 and json.loads(body)["choices"][0]["message"]["content"], body
    metrics = ok(fleet, "f1", f"curl -s http://{fleet.node('f1').address}:29000/metrics")
    assert "smg_" in metrics


def test_requests_through_the_gateway_are_spread_and_verify_passes(fleet: LabHandle) -> None:
    r = gpuhost(fleet, "verify", "serve", "--group", "glm5", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    findings = json.loads(r.stdout)["findings"]
    spread = [f for f in findings if f["check"] == "gateway.requests"]
    assert spread and spread[0]["level"] == "PASS", findings
    msg = spread[0]["message"]
    assert "9/9 requests" in msg and all(f"{n}/CT {CT}: 3" in msg for n in NODES), msg  # round_robin: 3 each


def test_rerun_converges_with_nothing_changed(fleet: LabHandle) -> None:
    before = gateway_started(fleet)
    r = gpuhost(fleet, "launch", "sglang", "--group", "glm5", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert sum(int(h["changed"]) for h in report["hosts"].values()) == 0, r.stdout
    assert gateway_started(fleet) == before


def test_a_stopped_replica_is_taken_out_and_the_endpoint_keeps_answering(fleet: LabHandle) -> None:
    ok(fleet, "f2", f"pct exec {CT} -- systemctl stop gpuhost-sglang.service")
    try:
        deadline = time.monotonic() + 20
        while True:  # the gateway's own health checks (interval 1 s, threshold 1) take it out
            state = ok(
                fleet,
                "f1",
                f"curl -s -H 'Authorization: Bearer {API_KEY}' http://{fleet.node('f1').address}:30080/workers",
            )
            dead = [w for w in json.loads(state)["workers"] if not w["is_healthy"]]
            if dead or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert [w["url"] for w in dead] == [f"http://{fleet.node('f2').address}:30000"], state
        for _ in range(6):
            code, body = through_gateway(fleet)
            assert code == 200, body
        r = gpuhost(fleet, "verify", "serve", "--group", "glm5")
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"f2/CT {CT} (http://{fleet.node('f2').address}:30000) is taken out" in r.stdout, r.stdout
        assert "9/9 requests" in r.stdout, r.stdout  # the two live replicas answer all of them through it
        assert f"served by f1/CT {CT}: " in r.stdout and f"f2/CT {CT}: " not in r.stdout.split("served by")[1]
    finally:
        ok(fleet, "f2", f"pct exec {CT} -- systemctl start gpuhost-sglang.service")


def test_removing_a_replica_updates_the_gateway_without_a_restart(fleet: LabHandle) -> None:
    r = gpuhost(fleet, "launch", "sglang", "--group", "glm5")  # f2 back: ready again, healthy in the gateway
    assert r.returncode == 0, r.stdout + r.stderr
    before = gateway_started(fleet)
    write_inventory(fleet, ("f1", "f3"))
    r = gpuhost(fleet, "launch", "sglang", "--group", "glm5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"remove http://{fleet.node('f2').address}:30000" in r.stdout, r.stdout
    assert "2/2 replicas healthy" in r.stdout
    assert gateway_started(fleet) == before  # changed live through the worker API
    state = ok(
        fleet, "f1", f"curl -s -H 'Authorization: Bearer {API_KEY}' http://{fleet.node('f1').address}:30080/workers"
    )
    assert sorted(w["url"] for w in json.loads(state)["workers"]) == [
        f"http://{fleet.node(n).address}:30000" for n in ("f1", "f3")
    ]
