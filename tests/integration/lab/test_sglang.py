"""The lab serves SGLang: the offline package index, the stand-in server in a GPU container, its
errors, faults and benchmark client, and simulated GPUs whose power follows the load.

One GPU node (``sgl``: 2 RTX PRO 6000 Blackwell, the host driver loaded) and one privileged
container with both GPUs and the driver's userspace; two virtualenvs made in it once per module.
"""

from __future__ import annotations

import json
import shlex
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from gpuhost.inventory.loader import load_inventory
from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.integration.lab.test_gpu import MODEL as GPU_MODEL
from tests.integration.lab.test_gpu import OLD, fetch_installer, install_host_driver, ok
from tests.lab_fixtures import CommandResult, LabHandle, lab_address, start_lab

CT = 220
VENV, OLD_VENV = "/opt/sglang", "/opt/sglang-old"
CONTROL = "/etc/gpuhost-lab/sglang"
PORT = 30000
MODEL = "/srv/models/GLM-5-NVFP4"  # the node's snapshot, bind-mounted into the container


@pytest.fixture(scope="module")
def sgl_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    state = tmp_path_factory.mktemp("sgllab") / "state"
    handle = start_lab(
        state, [NodeSpec("sgl", lab_address(8, 1), boot="grub", cpu="amd", pve=8, gpus=2, gpu_model=GPU_MODEL, numa=1)]
    )
    try:
        node = "sgl"
        ok(handle, node, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q dkms proxmox-headers-$(uname -r)")
        assert install_host_driver(handle, node, OLD).rc == 0
        ok(handle, node, "test -c /dev/nvidia-uvm || nvidia-modprobe -c0 -u")
        ok(
            handle,
            node,
            f"pct create {CT} local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname llm "
            "--memory 8192 --rootfs local-lvm:8 --unprivileged 0 && "
            f"pct set {CT} --dev0 /dev/nvidia0,gid=44 --dev1 /dev/nvidia1,gid=44 "
            f"--dev2 /dev/nvidiactl,gid=44 --dev3 /dev/nvidia-uvm,gid=44 && "
            f"echo 'lxc.mount.entry: {lab_vars(handle)['lab_model_dir']} {MODEL[1:]} none bind,ro,"
            f"create=dir' >> /etc/pve/lxc/{CT}.conf && pct start {CT}",
        )
        path = fetch_installer(handle, node, OLD)
        ok(
            handle,
            node,
            f"pct exec {CT} -- mkdir -p /var/cache/gpuhost && pct push {CT} {path} {path} && "
            f"pct exec {CT} -- sh {path} --silent --no-x-check --no-nouveau-check --no-kernel-modules",
        )
        ct(handle, f"mkdir -p {CONTROL} && echo 0.3 > {CONTROL}/delay_scale")
        yield handle
    finally:
        handle.close()
        manager.down(state)


def ct(lab: LabHandle, command: str, timeout: float = 120) -> CommandResult:
    return lab.run("sgl", f"pct exec {CT} -- sh -c {shlex.quote(command)}", timeout)


def ct_ok(lab: LabHandle, command: str, timeout: float = 120) -> str:
    r = ct(lab, command, timeout)
    assert r.rc == 0, f"{command} -> exit {r.rc}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def lab_vars(lab: LabHandle) -> dict[str, Any]:
    return dict(load_inventory(lab.inventory).nodes["sgl"].vars)


@pytest.fixture(scope="module")
def venvs(sgl_lab: LabHandle) -> dict[str, str]:
    """pip into one venv (sglang 0.5.23 and uv), then uv into another (sglang 0.5.8.post1)."""
    index = lab_vars(sgl_lab)["pip_index_url"]
    ct_ok(sgl_lab, f"python3 -m venv {VENV} && {VENV}/bin/pip install -q --index-url {index} sglang==0.5.23 uv")
    ct_ok(
        sgl_lab,
        f"{VENV}/bin/uv venv -q --python /usr/bin/python3 {OLD_VENV} && "
        f"{VENV}/bin/uv pip install -q --python {OLD_VENV}/bin/python --index-url {index} "
        "sglang==0.5.8.post1",
    )
    return {"new": VENV, "old": OLD_VENV}


def launch(lab: LabHandle, venv: str, args: str, log: str = "/root/sglang.log") -> int:
    host = lab.node("sgl").address
    out = ct_ok(
        lab,
        f"setsid nohup {venv}/bin/python -m sglang.launch_server --model-path {MODEL} "
        f"--host {host} --port {PORT} {args} > {log} 2>&1 < /dev/null & echo $!",
    )
    return int(out.strip())


def wait_exit(lab: LabHandle, pid: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while ct(lab, f"[ -d /proc/{pid} ] && ! grep -q '^State:.*Z' /proc/{pid}/status").rc == 0:
        assert time.monotonic() < deadline, f"server {pid} still running"
        time.sleep(0.1)


def stop(lab: LabHandle, pid: int) -> None:
    ct(lab, f"kill {pid}")
    wait_exit(lab, pid)


def url(lab: LabHandle, path: str) -> str:
    return f"http://{lab.node('sgl').address}:{PORT}{path}"


def http(
    lab: LabHandle, path: str, body: dict[str, Any] | None = None, key: str | None = None, timeout: float = 30
) -> tuple[int, bytes]:
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url(lab, path), data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_ready(lab: LabHandle, timeout: float = 30) -> list[int | str]:
    """Poll /health until 200; returns what was seen on the way (codes, 'refused')."""
    seen: list[int | str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            code, _ = http(lab, "/health", timeout=2)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            code = "refused"
        if not seen or seen[-1] != code:
            seen.append(code)
        if code == 200:
            return seen
        time.sleep(0.02)
    raise AssertionError(f"never ready: {seen}")


def chat(lab: LabHandle, question: str, key: str | None = None, **extra: Any) -> dict[str, Any]:
    code, body = http(
        lab,
        "/v1/chat/completions",
        {
            "model": "glm-5",
            "temperature": 0,
            "max_tokens": 256,
            "messages": [{"role": "user", "content": question}],
            **extra,
        },
        key,
    )
    assert code == 200, body
    return json.loads(body)


def log_of(lab: LabHandle, log: str = "/root/sglang.log") -> str:
    return ct_ok(lab, f"cat {log}")


# ---- the index ---------------------------------------------------------------------------------


def test_index_installs_with_pip_and_uv_and_torch_sees_the_gpus(sgl_lab: LabHandle, venvs: dict[str, str]) -> None:
    assert lab_vars(sgl_lab)["pip_index_url"] == f"http://{sgl_lab.node('sgl').address}:3141/pypi/simple"
    probe = (
        "import sglang, torch, transformers; print(sglang.__version__, torch.__version__, "
        "transformers.__version__, torch.cuda.is_available(), torch.cuda.device_count(), "
        "torch.cuda.get_device_capability(0))"
    )
    assert ct_ok(sgl_lab, f"{VENV}/bin/python -c {shlex.quote(probe)}").split(" ", 5) == [
        "0.5.23",
        "2.14.1",
        "5.19.0",
        "True",
        "2",
        "(12, 0)\n",
    ]
    assert ct_ok(sgl_lab, f"{OLD_VENV}/bin/python -c {shlex.quote(probe)}").split()[:3] == [
        "0.5.8.post1",
        "2.9.1",
        "4.57.1",
    ]
    assert ct_ok(sgl_lab, f"{VENV}/bin/uv --version").startswith("uv 0.")
    serve = ct(sgl_lab, f"{VENV}/bin/sglang serve --model-path m --pp 2")  # the console script
    assert serve.rc == 2 and serve.stderr.splitlines()[-1].startswith("sglang serve: error: ambiguous option: --pp")
    assert (
        ct(sgl_lab, f"{VENV}/bin/pip install -q --index-url {lab_vars(sgl_lab)['pip_index_url']} no-such-package").rc
        != 0
    )


# ---- serving -----------------------------------------------------------------------------------


def test_good_flags_serve_health_models_chat_stream_info_metrics(sgl_lab: LabHandle, venvs: dict[str, str]) -> None:
    pid = launch(
        sgl_lab,
        VENV,
        "--tp-size 2 --quantization modelopt_fp4 --kv-cache-dtype fp8_e4m3 "
        "--reasoning-parser glm45 --tool-call-parser glm47 --served-model-name glm-5 "
        "--enable-metrics --api-key sk-lab --mem-fraction-static 0.85 "
        "--cuda-graph-max-bs-decode 64",
    )
    try:
        seen = wait_ready(sgl_lab)
        assert seen[0] == "refused" and 503 in seen and seen[-1] == 200
        log = log_of(sgl_lab)
        order = [
            "'sglang serve' is the recommended entrypoint",
            "server_args=",
            "Set DSA backends for GLM FP8 KV Cache on SM120/SM121: prefill=flashinfer_sparse_mla",
            "Loading safetensors checkpoint shards: 100% Completed",
            "Load weight end. elapsed=",
            "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: ",
            "Capture target decode CUDA graph begin. backend=full",
            "Capture target decode CUDA graph end. bs=",
            f"Uvicorn running on http://{sgl_lab.node('sgl').address}:{PORT}",
            "The server is fired up and ready to roll!",
        ]
        positions = [log.find(s) for s in order]
        assert -1 not in positions and positions == sorted(positions), log
        assert http(sgl_lab, "/v1/models")[0] == 401
        models = json.loads(http(sgl_lab, "/v1/models", key="sk-lab")[1])
        assert models["data"][0]["id"] == "glm-5"
        answer = chat(sgl_lab, "What is 17*23? Answer with just the number.", "sk-lab", logprobs=True, top_logprobs=2)
        msg = answer["choices"][0]["message"]
        assert msg["content"] == "391" and "391" in msg["reasoning_content"]
        assert all(-100 < e["logprob"] <= 0 for e in answer["choices"][0]["logprobs"]["content"])
        assert chat(sgl_lab, "What is the capital of France?", "sk-lab")["choices"][0]["message"]["content"] == "Paris"
        code, raw = http(
            sgl_lab,
            "/v1/chat/completions",
            {"model": "glm-5", "stream": True, "messages": [{"role": "user", "content": "What is 2+2?"}]},
            "sk-lab",
        )
        events = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
        assert code == 200 and events[-1] == "[DONE]"
        deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-1]]
        assert "".join(d.get("content") or "" for d in deltas).strip() == "4"
        assert any(d.get("reasoning_content") for d in deltas)
        info = json.loads(http(sgl_lab, "/server_info", key="sk-lab")[1])
        assert info["api_key"] == "sk-lab" and info["version"] == "0.5.23"
        assert (info["dsa_decode_backend"], info["moe_runner_backend"]) == (
            "flashinfer_sparse_mla",
            "flashinfer_cutlass",
        )
        code, metrics = http(sgl_lab, "/metrics")
        assert code == 200 and b"sglang:num_running_reqs{" in metrics and b"sglang:generation_tokens_total{" in metrics
    finally:
        stop(sgl_lab, pid)
    assert "Gracefully exiting... Remaining number of requests 0." in log_of(sgl_lab)


@pytest.mark.parametrize(
    ("venv", "flags", "text"),
    [
        (
            VENV,
            "--cuda-graph-max-bs 64",
            (
                "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
                "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
            ),
        ),
        (
            VENV,
            "--nsa-decode-backend trtllm",
            "sglang serve: error: unrecognized arguments: --nsa-decode-backend trtllm",
        ),
        (
            VENV,
            "--kv-cache-dtype fp8",
            (
                "sglang serve: error: argument --kv-cache-dtype: invalid choice: 'fp8' (choose "
                "from 'auto', 'fp8_e5m2', 'fp8_e4m3', 'mxfp8', 'bf16', 'bfloat16', 'nvfp4', "
                "'fp4_mx_block16')"
            ),
        ),
        (
            OLD_VENV,
            "--dsa-decode-backend trtllm",
            ("launch_server.py: error: unrecognized arguments: --dsa-decode-backend trtllm"),
        ),
    ],
)
def test_wrong_flags_exit_2_with_argparse_text(
    sgl_lab: LabHandle, venvs: dict[str, str], venv: str, flags: str, text: str
) -> None:
    r = ct(sgl_lab, f"{venv}/bin/python -m sglang.launch_server --model-path /nowhere {flags}")
    assert r.rc == 2 and r.stderr.splitlines()[-1] == text


@pytest.mark.parametrize(
    ("flags", "text"),
    [
        (
            "--tp 2 --quantization modelopt_fp4 --enable-flashinfer-allreduce-fusion",
            "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.",
        ),
        (
            "--tp 2 --kv-cache-dtype fp8_e4m3 --dsa-prefill-backend trtllm --dsa-decode-backend trtllm",
            (
                "ValueError: GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla (default) "
                "or triton_sparse_mla (prefill), but got ['trtllm']."
            ),
        ),
        ("--tp 4", "RuntimeError: CUDA error: invalid device ordinal"),
    ],
)
def test_known_bad_combinations_fail_with_sglangs_errors(
    sgl_lab: LabHandle, venvs: dict[str, str], flags: str, text: str
) -> None:
    r = ct(sgl_lab, f"{VENV}/bin/python -m sglang.launch_server --model-path {MODEL} {flags}")
    assert r.rc == 1 and text in r.stderr and "Scheduler hit an exception" in r.stderr, r.stderr


def test_transformers_too_old_for_glm_moe_dsa(sgl_lab: LabHandle, venvs: dict[str, str]) -> None:
    r = ct(sgl_lab, f"{OLD_VENV}/bin/python -m sglang.launch_server --model-path {MODEL} --tp 2 --trust-remote-code")
    assert r.rc == 1
    assert "KeyError: 'glm_moe_dsa'" in r.stderr
    assert (
        "ValueError: The checkpoint you are trying to load has model type `glm_moe_dsa` but Transformers does "
        "not recognize this architecture." in r.stderr
    )


def test_port_in_use_fails_after_loading_with_uvicorns_error(sgl_lab: LabHandle, venvs: dict[str, str]) -> None:
    pid = launch(sgl_lab, VENV, "--tp 2")
    try:
        wait_ready(sgl_lab)
        host = sgl_lab.node("sgl").address
        r = ct(
            sgl_lab,
            f"{VENV}/bin/python -m sglang.launch_server --model-path {MODEL} --tp 2 --host {host} --port {PORT}",
        )
        assert r.rc == 1 and "Load weight end." in r.stderr
        assert (
            f"ERROR:    [Errno 98] error while attempting to bind on address ('{host}', {PORT}): address already "
            "in use" in r.stderr
        )
        old = ct(sgl_lab, f"{OLD_VENV}/bin/python -m sglang.benchmark.serving --port {PORT}")
        assert old.rc == 1 and "No module named 'sglang.benchmark'" in old.stderr
    finally:
        stop(sgl_lab, pid)


# ---- faults ------------------------------------------------------------------------------------


def with_fault(lab: LabHandle, fault: str) -> int:
    """Switch one fault on (a line in the control file) and launch; the caller switches it off."""
    ct_ok(lab, f"echo {fault} > {CONTROL}/faults")
    return launch(lab, VENV, "--tp 2 --reasoning-parser glm45 --served-model-name glm-5", f"/root/{fault}.log")


def test_faults_nan_garbage_hang_and_oom(sgl_lab: LabHandle, venvs: dict[str, str]) -> None:
    try:
        pid = with_fault(sgl_lab, "oom-on-load")
        wait_exit(sgl_lab, pid)
        assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in log_of(
            sgl_lab, "/root/oom-on-load.log"
        )

        pid = with_fault(sgl_lab, "hang-cuda-graph")
        deadline = time.monotonic() + 10
        while "CUDA graph begin" not in log_of(sgl_lab, "/root/hang-cuda-graph.log"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(0.5)
        assert "CUDA graph end" not in log_of(sgl_lab, "/root/hang-cuda-graph.log")
        stop(sgl_lab, pid)

        pid = with_fault(sgl_lab, "garbage")
        try:
            wait_ready(sgl_lab)
            assert chat(sgl_lab, "What is 17*23?")["choices"][0]["message"]["content"] != "391"
        finally:
            stop(sgl_lab, pid)

        pid = with_fault(sgl_lab, "nan-on-first-decode")
        wait_ready(sgl_lab)
        # temperature 0: 0.5.23 takes argmax of the NaN logits (layers/sampler.py, is_all_greedy) and serves on,
        # wrong tokens and null log-probabilities (ORJSON writes NaN as null)
        greedy = chat(sgl_lab, "What is 17*23?", logprobs=True, top_logprobs=1)["choices"][0]
        assert greedy["message"]["content"] != "391"
        assert {e["logprob"] for e in greedy["logprobs"]["content"]} == {None}
        # a sampled request reaches torch.multinomial, which raises: the scheduler and the server die
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            chat(sgl_lab, "Hello! What model are you?", temperature=0.7)
        wait_exit(sgl_lab, pid)
        log = log_of(sgl_lab, "/root/nan-on-first-decode.log")
        assert "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0" in log
        assert "Received sigquit from a child process. It usually means the child failed." in log
    finally:
        ct_ok(sgl_lab, f"rm -f {CONTROL}/faults")


# ---- power and the benchmark client ------------------------------------------------------------


def power(lab: LabHandle) -> list[tuple[int, float]]:
    out = ok(lab, "sgl", "nvidia-smi --query-gpu=utilization.gpu,power.draw --format=csv,noheader,nounits")
    return [(int(u), float(p)) for u, p in (line.split(", ") for line in out.splitlines())]


def test_power_follows_load_and_bench_prints_its_block(sgl_lab: LabHandle, venvs: dict[str, str]) -> None:
    idle = power(sgl_lab)
    assert all(u == 0 and 80 <= p <= 90 for u, p in idle), idle
    pid = launch(sgl_lab, VENV, "--tp 2 --served-model-name glm-5")
    try:
        wait_ready(sgl_lab)
        host = sgl_lab.node("sgl").address
        bench = (
            f"cd /root && {VENV}/bin/python -m sglang.benchmark.serving --backend sglang --host {host} "
            f"--port {PORT} --model glm-5 --dataset-name random-ids --random-input-len 64 "
            "--random-output-len 300 --random-range-ratio 1.0 --num-prompts 16 --max-concurrency 8 "
            "--warmup-requests 1 --output-file /root/bench.jsonl"
        )
        result: dict[str, CommandResult] = {}
        runner = threading.Thread(target=lambda: result.setdefault("r", ct(sgl_lab, bench)))
        runner.start()
        busy: list[tuple[int, float]] = []
        deadline = time.monotonic() + 20
        while runner.is_alive() and time.monotonic() < deadline:
            sample = power(sgl_lab)
            if min(u for u, _ in sample) >= 40:
                busy = sample
                break
            time.sleep(0.1)
        runner.join(60)
        # under load every GPU draws well above its idle power (how far depends on requests in flight)
        assert busy and all(p > 2 * max(q for _, q in idle) for _, p in busy), (idle, busy)
        r = result["r"]
        assert r.rc == 0, r.stderr
        block = r.stdout[r.stdout.index("============ Serving Benchmark Result ============") :]
        lines = block.splitlines()
        row = "{:<40} {:<10}".format
        assert lines[1] == row("Backend:", "sglang")
        assert row("Max request concurrency:", 8) in lines and row("Successful requests:", 16) in lines
        assert any(line.startswith("P95 TTFT (ms):") for line in lines) and lines[-1] == "=" * 50
        record = json.loads(ct_ok(sgl_lab, "tail -n 1 /root/bench.jsonl"))
        assert len(record) == 49 and record["completed"] == 16 and record["total_output_tokens"] == 16 * 300
        assert record["server_info"]["version"] == "0.5.23"
        old = ct(
            sgl_lab,
            f"cd /root && {VENV}/bin/python -m sglang.bench_serving --backend sglang --host {host} "
            f"--port {PORT} --dataset-name random-ids --num-prompts 2 --random-output-len 8 "
            "--output-file /root/b2.jsonl",
        )
        assert old.rc == 0 and "FutureWarning: `sglang.bench_serving` is deprecated" in old.stderr
    finally:
        stop(sgl_lab, pid)
    time.sleep(0.2)
    assert all(u == 0 and p < 90 for u, p in power(sgl_lab))
