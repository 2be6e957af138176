"""``gpuhost launch sglang --group`` for one replica over two lab nodes: tensor parallelism 2 across two nodes of one
GPU each (the stand-in runs one rank per node and meets at rank 0's rendezvous as torch does), behind the real SGLang
Model Gateway on the first node, from one command.

What a user sees: rank 0's unit was started before the follower's (the units' start timestamps; gpuhost waits for
rank 0 to listen on its rendezvous in between); rank 0 alone is not ready until its follower joins; readiness and
the canary come from rank 0 alone; the gateway routes to rank 0's URL only; the follower's /health answers 200 but it serves no request;
a re-run changes nothing; ``serve stop`` stops the group from rank 0 (the follower ends with it); a follower started
before rank 0 keeps retrying, and the next launch brings the group up around it.

Lab networking: nodes share the host's network namespace on their own 127.x addresses and a container shares its
node's, so each member's ``serve.host`` is its node's address and rank 0's rendezvous is on rank 0's node address.
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

from gpuhost.facts import serve_layout as target
from gpuhost.lab import manager
from gpuhost.lab.pypi.seed import cached_wheels
from gpuhost.lab.sglang.model import NODE_DIR
from gpuhost.lab.spec import NodeSpec
from tests.integration.lab.test_fleet import _prepare
from tests.integration.lab.test_gpu import MODEL as GPU_MODEL
from tests.integration.lab.test_gpu import ok
from tests.lab_fixtures import FAST_SERVING_VARS, LabHandle, gpuhost_cli, lab_address, start_lab

CT = 240  # test_fleet's _prepare creates and equips this container
NODES = ("mn1", "mn2")
API_KEY = "sk-multinode-test-5d1e7a20"
UNIT = "gpuhost-sglang.service"
PORT = 20000

PROFILES = f"""
profiles:
  - name: lab-glm5-tp2-2node
    description: the shipped glm5-nvfp4-tp8-sm120 as TP2 over two nodes of one GPU each
    pins: {{sglang: "0.5.23", transformers: "5.19.0", flashinfer: "0.7.2", torch: "2.14.1", cuda: 13}}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 1
    tp_size: 2
    flags:
      --quantization: modelopt_fp4
      --kv-cache-dtype: fp8_e4m3
      --served-model-name: glm-5
      --enable-metrics: true
    env: {{NCCL_IB_DISABLE: "1"}}
    multinode: {{nnodes: 2, dist_init_port: {PORT}, nccl_port: 20010, socket_ifname: lo, dist_timeout: 120}}
"""

pytestmark = pytest.mark.skipif(
    not any(w.name.startswith("smg-1.13.0-") for w in cached_wheels()),
    reason="the real smg wheel is not in the lab's wheel cache (scripts/setup.sh fetches it)",
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    state = tmp_path_factory.mktemp("multinodelab") / "state"
    specs = [
        NodeSpec(n, lab_address(16, i + 1), boot="grub", cpu="amd", pve=8, gpus=1, gpu_model=GPU_MODEL, numa=1)
        for i, n in enumerate(NODES)
    ]
    handle = start_lab(state, specs)
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda n: _prepare(handle, n), NODES))
        write_inventory(handle)
        yield handle
    finally:
        handle.close()
        manager.down(state)


def write_inventory(lab: LabHandle) -> Path:
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
                    "profile": "lab-glm5-tp2-2node",
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
            "big": {
                "replicas": [{"members": [{"node": n, "ctid": CT} for n in NODES]}],
                "gateway": {
                    "node": "mn1",
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
    path = lab.state_dir / "multinode.yml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def gpuhost(lab: LabHandle, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return gpuhost_cli(lab.state_dir / "multinode.yml", *args, timeout=timeout)


def journal(lab: LabHandle, node: str) -> list[str]:
    """The journal lines of the member's running process: after the last start line of the launch script (a start
    by hand repeats gpuhost's marker; the lab's journal keeps no timestamps)."""
    lines = ok(lab, node, f"pct exec {CT} -- journalctl -u {UNIT} -o cat --no-pager -q").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(target.MARKER_PREFIX)]
    assert starts, lines
    return lines[starts[-1] + 1 :]


def start_time(lab: LabHandle, node: str) -> int:
    """When the member's unit started: CLOCK_MONOTONIC in microseconds (one kernel: comparable across lab nodes)."""
    out = ok(lab, node, f"pct exec {CT} -- systemctl show -p ExecMainStartTimestampMonotonic {UNIT}")
    return int(next(ln for ln in out.splitlines() if ln.startswith("ExecMainStartTimestampMonotonic=")).split("=")[1])


def curl(lab: LabHandle, node: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    data = f"-H 'Content-Type: application/json' -d {shlex.quote(json.dumps(body))} " if body else ""
    r = lab.run(
        node,
        f"curl -s -o /tmp/mn.out -w '%{{http_code}}' -H 'Authorization: Bearer {API_KEY}' {data}{url}; echo; "
        "cat /tmp/mn.out",
    )
    code, _, text = r.stdout.partition("\n")
    return int(code or 0), text


QUESTION = {"model": "glm-5", "messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 4}


def started(lab: LabHandle) -> list[str]:
    return [ok(lab, n, f"pct exec {CT} -- systemctl show -p ExecMainStartTimestamp,MainPID {UNIT}") for n in NODES]


def test_one_command_starts_rank_0_then_the_follower_and_serves_from_rank_0(pair: LabHandle) -> None:
    r = gpuhost(pair, "launch", "sglang", "--group", "big")
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    a1, a2 = (pair.node(n).address for n in NODES)
    assert f"hosts the rendezvous on {a1}:{PORT}" in text and f"rank 0 (mn1/CT {CT}) answers on {a1}:{PORT}" in text
    assert text.count("canary 4/4 correct") == 1, text  # proven on rank 0 alone
    assert "1/1 replicas healthy" in text and API_KEY not in text
    assert start_time(pair, "mn1") < start_time(pair, "mn2")  # rank 0's unit first, then the follower's
    rank0, follower = journal(pair, "mn1"), journal(pair, "mn2")
    assert any(m.endswith("TP0] Init torch distributed begin.") for m in rank0)
    assert any("TP1] Init torch distributed ends." in m for m in follower)  # it joined rank 0
    assert any("The server is fired up and ready to roll!" in m for m in rank0)
    assert not any("fired up" in m for m in follower)  # a follower never becomes "ready": it has no API
    # the gateway routes to rank 0 only; a request through it is answered
    code, body = curl(pair, "mn1", f"http://{a1}:30080/workers")
    assert code == 200 and [w["url"] for w in json.loads(body)["workers"]] == [f"http://{a1}:30000"], body
    code, body = curl(pair, "mn1", f"http://{a1}:30080/v1/chat/completions", QUESTION)
    assert code == 200 and json.loads(body)["choices"][0]["message"]["content"], body
    # the follower: /health 200 whatever the group's state, and no API
    assert curl(pair, "mn2", f"http://{a2}:30000/health")[0] == 200
    code, body = curl(pair, "mn2", f"http://{a2}:30000/v1/chat/completions", QUESTION)
    assert code == 404 and json.loads(body) == {"detail": "Not Found"}, body


def test_rerun_converges_with_nothing_changed(pair: LabHandle) -> None:
    before = started(pair)
    for args in (("--group", "big"), ()):  # the group, and plain launch sglang (every replica the inventory lists)
        r = gpuhost(pair, "launch", "sglang", *args, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        report = json.loads(r.stdout)
        assert sum(int(h["changed"]) for h in report["hosts"].values()) == 0, r.stdout
    assert started(pair) == before


def test_verify_and_status_judge_the_replica_on_rank_0(pair: LabHandle) -> None:
    r = gpuhost(pair, "verify", "serve", "--group", "big", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    findings = json.loads(r.stdout)["findings"]
    judged = {f["subject"] for f in findings if f["check"].startswith("serve.")}
    assert judged and all(s.startswith(f"mn1/CT {CT}") for s in judged), judged  # never the follower
    spread = [f for f in findings if f["check"] == "gateway.requests"]
    assert spread and spread[0]["level"] == "PASS", findings
    r = gpuhost(pair, "serve", "status")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"mn1/CT {CT} (rank 0 of 2): unit active, /health 200" in r.stdout, r.stdout
    assert f"mn2/CT {CT} (rank 1 of 2), serves no API: its replica answers on rank 0 mn1/CT {CT}" in r.stdout


def test_stopping_rank_0_stops_the_group(pair: LabHandle) -> None:
    t0 = time.monotonic()
    r = gpuhost(pair, "serve", "stop", "--limit", "mn2")  # the follower's node named: the whole replica stops
    assert r.returncode == 0, r.stdout + r.stderr
    assert time.monotonic() - t0 < 60  # no follower waited out its stop timeout: it ended with rank 0
    lines = r.stdout.splitlines()
    assert lines[:2] == [f"mn1/CT {CT} (rank 0 of 2): inactive", f"mn2/CT {CT} (rank 1 of 2): inactive"], r.stdout
    follower = journal(pair, "mn2")
    assert any("Scheduler or DataParallelController" in m and m.endswith("terminated with 0") for m in follower)


def test_rank_0_alone_is_not_ready_until_its_follower_joins(pair: LabHandle) -> None:
    a1 = pair.node("mn1").address
    ok(pair, "mn1", f"pct exec {CT} -- systemctl start {UNIT}")  # by hand, the follower stopped
    try:
        time.sleep(3)
        assert ok(pair, "mn1", f"pct exec {CT} -- systemctl is-active {UNIT}").strip() == "active"
        assert curl(pair, "mn1", f"http://{a1}:30000/health")[0] != 200  # no API before the group is formed
        assert journal(pair, "mn1")[-1].endswith("TP0] Init torch distributed begin.")  # it waits
        ok(pair, "mn2", f"pct exec {CT} -- systemctl start {UNIT}")
        deadline = time.monotonic() + 30
        while curl(pair, "mn1", f"http://{a1}:30000/health")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert curl(pair, "mn1", f"http://{a1}:30000/health")[0] == 200
        assert any("TP0] Init torch distributed ends." in m for m in journal(pair, "mn1"))
    finally:
        r = gpuhost(pair, "serve", "stop", "--all")
        assert r.returncode == 0, r.stdout + r.stderr


def test_a_follower_started_first_waits_for_rank_0_and_the_launch_completes_the_group(pair: LabHandle) -> None:
    ok(pair, "mn2", f"pct exec {CT} -- systemctl start {UNIT}")  # by hand, before rank 0
    time.sleep(3)
    assert ok(pair, "mn2", f"pct exec {CT} -- systemctl is-active {UNIT}").strip() == "active"  # still retrying
    tail = ok(pair, "mn2", f"pct exec {CT} -- journalctl -u {UNIT} -o cat --no-pager -q -n 3")
    assert tail.strip().endswith("TP1] Init torch distributed begin."), tail
    assert ok(pair, "mn1", f"pct exec {CT} -- systemctl is-active {UNIT} || true").strip() == "inactive"
    r = gpuhost(pair, "launch", "sglang", "--group", "big")
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    assert "canary 4/4 correct" in text and "1/1 replicas healthy" in text
    # the follower that was waiting joined the new rank 0 and was left running
    assert "Init torch distributed ends." in ok(
        pair, "mn2", f"pct exec {CT} -- journalctl -u {UNIT} -o cat --no-pager -q -n 40"
    )
