"""``gpuhost launch sglang`` against a lab container: validated, installed, started, ready, proven; and the ways a
launch must fail — a known-bad profile refused before install, a crash signature while waiting, a stale ready line
of an earlier start, a CUDA-graph capture hang, a server that answers with garbage.

One GPU node (2 RTX PRO 6000 Blackwell, the host driver loaded) and one privileged container with both GPUs and
the driver's userspace; the inventory gives it a ``serve:`` entry with TP2 variants of the shipped GLM-5 profile.
The tests run in order and share the container (a module of one story).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gpuhost.lab import manager
from gpuhost.lab.sglang.model import NODE_DIR
from gpuhost.lab.spec import NodeSpec
from tests.integration.lab.test_gpu import MODEL as GPU_MODEL
from tests.integration.lab.test_gpu import OLD, fetch_installer, install_host_driver, ok
from tests.lab_fixtures import CommandResult, LabHandle, gpuhost_cli, lab_address, start_lab
from tests.support.kept import wait_kept

CT = 230
CONTROL = "/etc/gpuhost-lab/sglang"
API_KEY = "sk-launch-test-7f3a91c2"

PROFILES = """
profiles:
  - name: lab-glm5-tp2
    description: the shipped glm5-nvfp4-tp8-sm120 at TP2 (the lab node has 2 GPUs)
    pins: {sglang: "0.5.23", transformers: "5.19.0", flashinfer: "0.7.2", torch: "2.14.1",
           sgl_deep_gemm: "0.2.3.post2", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 2
    tp_size: 2
    flags: &flags
      --quantization: modelopt_fp4
      --kv-cache-dtype: fp8_e4m3
      --dsa-prefill-backend: flashinfer_sparse_mla
      --dsa-decode-backend: flashinfer_sparse_mla
      --moe-runner-backend: flashinfer_cutlass
      --reasoning-parser: glm45
      --tool-call-parser: glm47
      --mem-fraction-static: 0.85
      --cuda-graph-max-bs-decode: 64
      --served-model-name: glm-5
      --enable-metrics: true
    env: {NCCL_IB_DISABLE: "1"}
  - name: lab-glm5-tp2-breakable
    status: fallback
    fallback_of: lab-glm5-tp2
    pins: {sglang: "0.5.23", transformers: "5.19.0", flashinfer: "0.7.2", torch: "2.14.1", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 2
    tp_size: 2
    flags: {--cuda-graph-backend-decode: breakable, --served-model-name: glm-5}
  - name: lab-glm5-tp2-autotune-off
    status: fallback
    fallback_of: lab-glm5-tp2
    pins: {sglang: "0.5.23", transformers: "5.19.0", flashinfer: "0.7.2", torch: "2.14.1", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 2
    tp_size: 2
    flags: {--disable-flashinfer-autotune: true, --served-model-name: glm-5}
  - name: lab-glm5-tp2-allreduce-fusion
    description: known bad on SM120 (sglang#15650)
    pins: {sglang: "0.5.23", transformers: "5.19.0", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 2
    tp_size: 2
    flags: {--enable-flashinfer-allreduce-fusion: true, --served-model-name: glm-5}
"""


@pytest.fixture(scope="module")
def launch_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    yield from serving_lab(tmp_path_factory.mktemp("launchlab") / "state", lab_address(9, 1))


def serving_lab(state: Path, address: str) -> Iterator[LabHandle]:
    """Node ``sgl`` at ``address`` with the host driver, CT 230 with both GPUs and the driver's userspace, and the
    inventory ``launch.yml`` that gives the container its ``serve:`` entry (stopped and removed after)."""
    handle = start_lab(
        state, [NodeSpec("sgl", address, boot="grub", cpu="amd", pve=8, gpus=2, gpu_model=GPU_MODEL, numa=1)]
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
            f"--dev2 /dev/nvidiactl,gid=44 --dev3 /dev/nvidia-uvm,gid=44 && pct start {CT}",
        )
        path = fetch_installer(handle, node, OLD)
        ok(
            handle,
            node,
            f"pct exec {CT} -- mkdir -p /var/cache/gpuhost && pct push {CT} {path} {path} && "
            f"pct exec {CT} -- sh {path} --silent --no-x-check --no-nouveau-check --no-kernel-modules",
            timeout=300,
        )
        ct(handle, f"mkdir -p {CONTROL} && echo 0.3 > {CONTROL}/delay_scale")
        write_inventory(handle)
        yield handle
    finally:
        handle.close()
        manager.down(state)


def write_inventory(lab: LabHandle) -> Path:
    """The lab's inventory, plus the container's serve: entry (API key from a 0600 file) and the test profiles."""
    yaml = YAML(typ="safe", pure=True)
    doc: dict[str, Any] = yaml.load(lab.inventory.read_text())
    (lab.state_dir / "profiles.yml").write_text(PROFILES)
    key = lab.state_dir / "api-key"
    key.write_text(API_KEY + "\n")
    key.chmod(0o600)
    node = doc["nodes"]["sgl"]
    node["containers"] = {
        CT: {
            "hostname": "llm",
            "serve": {
                "profile": "lab-glm5-tp2",
                "model": "/srv/models/GLM-5-NVFP4",
                "model_node_dir": NODE_DIR,
                "host": lab.node("sgl").address,
                "port": 30000,
                "api_key_file": "api-key",
            },
        }
    }
    doc["vars"].update(
        sglang_profile_dirs=[str(lab.state_dir / "profiles.yml")],
        sglang_ready_timeout=90,
        sglang_first_ready_timeout=120,
        sglang_capture_timeout=4,
        sglang_autotune_timeout=4,
        sglang_poll_interval=0.3,
    )
    path = lab.state_dir / "launch.yml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def ct(lab: LabHandle, command: str, timeout: float = 120) -> CommandResult:
    return lab.run("sgl", f"pct exec {CT} -- sh -c {shlex.quote(command)}", timeout)


def gpuhost(lab: LabHandle, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return gpuhost_cli(lab.state_dir / "launch.yml", *args, timeout=timeout)


def changed(out: str) -> int:
    """``changed`` of the run's JSON report (``--json``)."""
    report = json.loads(out)
    return sum(int(h["changed"]) for h in report["hosts"].values())


def fault(lab: LabHandle, name: str | None) -> None:
    ct(lab, f"echo {name} > {CONTROL}/faults" if name else f"rm -f {CONTROL}/faults")


def test_known_bad_profile_is_refused_before_anything_is_installed(launch_lab: LabHandle) -> None:
    r = gpuhost(launch_lab, "launch", "sglang", "--profile", "lab-glm5-tp2-allreduce-fusion")
    assert r.returncode == 2, r.stdout + r.stderr
    text = r.stdout + r.stderr
    assert "profile lab-glm5-tp2-allreduce-fusion refused" in text and "allreduce" in text.lower()
    assert ct(launch_lab, "test -e /opt/gpuhost || test -e /etc/gpuhost").rc == 1


def test_check_diff_shows_command_env_and_unit_and_changes_nothing(launch_lab: LabHandle) -> None:
    r = gpuhost(launch_lab, "launch", "sglang", "--check", "--diff")
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert "/opt/gpuhost/sglang/lab-glm5-tp2/venv/bin/sglang serve --model-path /srv/models/GLM-5-NVFP4" in out
    assert "--tp-size 2" in out and '--api-key "$SGLANG_API_KEY"' in out
    # the env file holds the key: its diff shows the line with the key masked
    assert "EnvironmentFile=/etc/gpuhost/sglang.env" in out and "+SGLANG_API_KEY=********\n" in out
    assert API_KEY not in out + r.stderr
    # the readiness wait is described, with a first start's bounds (the container's SGLang cache is empty)
    assert "check mode: would wait up to 2.0 min (every 0.3 s) until CT 230 sglang ready at" in out, out
    assert "a first start: SGLang's cache is empty" in out
    assert ct(launch_lab, "test -e /opt/gpuhost").rc == 1


def test_launch_installs_starts_is_ready_and_proven_then_changes_nothing(launch_lab: LabHandle) -> None:
    # the first start at the stand-in's own pace (about 4 s of kernel builds, autotune and capture): at the module's
    # 0.3 a loaded machine could take longer from the unit's start to the first readiness look, which then finds the
    # server up already and waits for nothing (no progress lines to see)
    ct(launch_lab, f"echo 1 > {CONTROL}/delay_scale")
    try:
        first = gpuhost(launch_lab, "launch", "sglang")
    finally:
        ct(launch_lab, f"echo 0.3 > {CONTROL}/delay_scale")
    text = first.stdout + first.stderr
    assert first.returncode == 0, text
    assert API_KEY not in text
    assert re.search(r"ready, KV \d+ tokens, 1 graph capture \(after \d+ s\)", text), text
    assert "canary 4/4 correct" in text and "log-probabilities finite" in text
    assert "tokens/s single stream" in text
    assert "server_info: version=0.5.23, tp_size=2, quantization=modelopt_fp4, kv_cache_dtype=fp8_e4m3" in text
    # progress while waiting: a first start (the container's SGLang cache is empty) builds kernels and autotunes
    assert "readiness: JIT compilation of fused_moe_120" in first.stderr, first.stderr
    assert "readiness: FlashInfer autotune" in first.stderr, first.stderr
    assert ct(launch_lab, "stat -c %a /etc/gpuhost/sglang.env").stdout.strip() == "600"
    versions = ct(
        launch_lab, "/opt/gpuhost/sglang/lab-glm5-tp2/venv/bin/python -c 'import sglang; print(sglang.__version__)'"
    )
    assert versions.stdout.strip() == "0.5.23"
    second = gpuhost(launch_lab, "launch", "sglang", "--json")
    assert second.returncode == 0, second.stdout + second.stderr
    assert changed(second.stdout) == 0, second.stdout
    # converged: this start was proven in full by the first run, so only /health and /server_info are asked: two
    # batched reads (the container's facts ride in the node's batch before its status is known) and the probe; 3
    # round trips (7 before the read-ahead of later plays, the nested CT batch and the cheap proof; 4 before the
    # guest's facts were asked ahead of its status)
    again = json.loads(second.stdout)
    assert again["hosts"]["sgl"]["round_trips"] <= 3, again["hosts"]["sgl"]
    reasons = [t["reason"] for t in again["tasks"] if t["task"].startswith(f"CT {CT}: serves correctly")]
    assert len(reasons) == 1 and "passed on this start already" in reasons[0], reasons
    proved = gpuhost(launch_lab, "launch", "sglang", "--prove")
    assert proved.returncode == 0 and "canary 4/4 correct" in proved.stdout, proved.stdout + proved.stderr
    verify = gpuhost(launch_lab, "verify", "serve", "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    doc = json.loads(verify.stdout)
    assert "canary 4/4 correct" in {t["check"]: t["message"] for t in doc["tests"]}["serve.canary"], doc["tests"]
    assert doc["round_trips"] <= 2, doc["round_trips"]  # the unit's state, then the probe (inline, one command)
    verify = gpuhost(launch_lab, "verify", "serve")
    assert verify.returncode == 0 and "canary 4/4 correct" in verify.stdout, verify.stdout + verify.stderr
    status = gpuhost(launch_lab, "serve", "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "unit active, /health 200, profile lab-glm5-tp2 (SGLang 0.5.23)" in status.stdout
    assert API_KEY not in verify.stdout + status.stdout


def test_a_kept_connection_carries_a_converged_launch_with_its_containers_reads(
    launch_lab: LabHandle, tmp_path: Path
) -> None:
    """``ssh.persist``: once the user's keeper holds the node, a converged launch reads everything over it (the
    node's batch with the container's reads nested in it, then the live /health and /server_info asked inside the
    container): it opens no SSH connection of its own and never imports paramiko."""
    yaml = YAML(typ="safe", pure=True)
    doc = yaml.load((launch_lab.state_dir / "launch.yml").read_text())
    doc["nodes"]["sgl"]["ssh"]["persist"] = 30
    kept = launch_lab.state_dir / "launch-kept.yml"
    with kept.open("w") as fh:
        yaml.dump(doc, fh)
    env = {"XDG_RUNTIME_DIR": str(tmp_path / "run")}
    try:
        for _ in range(2):  # the first records the reads of this inventory's runs; each asks the keeper to hold
            r = gpuhost_cli(kept, "launch", "sglang", "--json", env=env)
            assert r.returncode == 0 and changed(r.stdout) == 0, r.stdout + r.stderr
        wait_kept(kept, "sgl", env)
        r = gpuhost_cli(kept, "launch", "sglang", "--json", env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
        assert r.returncode == 0 and changed(r.stdout) == 0, r.stdout + r.stderr
        report = json.loads(r.stdout)
        assert report["hosts"]["sgl"]["round_trips"] <= 3, report["hosts"]["sgl"]
        reasons = [t["reason"] for t in report["tasks"] if t["task"].startswith(f"CT {CT}: serves correctly")]
        assert len(reasons) == 1 and "passed on this start already" in reasons[0], reasons
        imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if "import time:" in line}
        assert "paramiko" not in imported, "the run opened an SSH connection of its own"
    finally:
        pid = tmp_path / "run" / "gpuhost" / "persist.pid"
        if pid.exists():
            os.kill(int(pid.read_text()), signal.SIGTERM)
        kept.unlink(missing_ok=True)


def test_a_changed_configuration_restarts_only_with_consent(launch_lab: LabHandle) -> None:
    yaml = YAML(typ="safe", pure=True)
    path = launch_lab.state_dir / "launch.yml"
    doc = yaml.load(path.read_text())
    doc["vars"]["sglang_p2p"] = {"available": True, "level": "PHB"}  # a P2P verdict: NCCL_P2P_LEVEL=PHB
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    before = ct(launch_lab, "cat /var/lib/gpuhost/sglang/start-marker").stdout
    r = gpuhost(launch_lab, "launch", "sglang")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "runs an older configuration" in r.stdout and "rerun with --allow-restart" in r.stdout
    assert ct(launch_lab, "cat /var/lib/gpuhost/sglang/start-marker").stdout == before  # not restarted
    r = gpuhost(launch_lab, "launch", "sglang", "--allow-restart")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "restart gpuhost-sglang.service" in r.stdout and "canary 4/4 correct" in r.stdout
    assert "NCCL_P2P_LEVEL=PHB" in ct(launch_lab, "cat /etc/gpuhost/sglang.env").stdout


def test_stale_ready_line_is_not_ready_and_a_capture_hang_stops_the_server(launch_lab: LabHandle) -> None:
    fault(launch_lab, "hang-cuda-graph")
    try:
        assert gpuhost(launch_lab, "serve", "restart", "--all").returncode == 0
        r = gpuhost(launch_lab, "launch", "sglang")
    finally:
        fault(launch_lab, None)
    text = r.stdout + r.stderr
    assert r.returncode == 1, text
    assert "CUDA graph capture hang" in text and "gpuhost launch sglang --profile lab-glm5-tp2-breakable" in text
    journal = ct(launch_lab, "journalctl -u gpuhost-sglang.service -o cat").stdout
    assert journal.count("The server is fired up and ready to roll!") >= 1  # the earlier start's line is there
    since = gpuhost(launch_lab, "serve", "logs").stdout
    assert "Capture target decode CUDA graph begin" in since and "fired up and ready" not in since
    assert ct(launch_lab, "systemctl is-active gpuhost-sglang.service").stdout.strip() == "inactive"


def test_an_autotune_that_never_ends_stops_the_server_and_names_the_autotune_off_fallback(
    launch_lab: LabHandle,
) -> None:
    fault(launch_lab, "hang-autotune")
    try:
        assert gpuhost(launch_lab, "serve", "restart", "--all").returncode == 0
        r = gpuhost(launch_lab, "launch", "sglang")
    finally:
        fault(launch_lab, None)
    text = r.stdout + r.stderr
    assert r.returncode == 1, text
    assert "FlashInfer autotune did not finish" in text and "(FlashInfer autotune for " in text
    assert "gpuhost launch sglang --profile lab-glm5-tp2-autotune-off --allow-restart (autotune off)" in text
    assert "CUDA graph capture hang" not in text  # autotune runs inside the capture window, but is not the capture
    assert ct(launch_lab, "systemctl is-active gpuhost-sglang.service").stdout.strip() == "inactive"


def test_crash_signature_fails_the_launch_with_its_diagnosis(launch_lab: LabHandle) -> None:
    fault(launch_lab, "oom-on-load")
    try:
        r = gpuhost(launch_lab, "launch", "sglang")
    finally:
        fault(launch_lab, None)
    text = r.stdout + r.stderr
    assert r.returncode == 1, text
    assert "crashed while starting" in text and "CUDA out of memory" in text
    assert "lower --mem-fraction-static" in text  # the signature's fix


def test_garbage_answers_fail_the_canary(launch_lab: LabHandle) -> None:
    fault(launch_lab, "garbage")
    try:
        assert gpuhost(launch_lab, "serve", "restart", "--all").returncode == 0
        r = gpuhost(launch_lab, "launch", "sglang")
        v = gpuhost(launch_lab, "verify", "serve")
    finally:
        fault(launch_lab, None)
    text = r.stdout + r.stderr
    assert r.returncode == 1, text
    assert re.search(r"CT 230: ready(, KV| \(up already\))", text) and "expected 391" in text
    assert v.returncode == 1 and "canary 0/4 correct" in v.stdout, v.stdout
    assert gpuhost(launch_lab, "serve", "restart", "--all").returncode == 0
    again = gpuhost(launch_lab, "launch", "sglang")
    assert again.returncode == 0, again.stdout + again.stderr
    assert gpuhost(launch_lab, "serve", "stop", "--all").returncode == 0
    assert ct(launch_lab, "systemctl is-active gpuhost-sglang.service").stdout.strip() == "inactive"


#: an old process that still holds the server's port for 24 s (on the node's address: lab nodes share the machine's
#: network namespace, so 0.0.0.0 would take port 30000 from every other test process's lab too)
HOLD_PORT = (
    "import socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
    "s.bind(('{address}', 30000)); s.listen(); time.sleep(24)"
)


def test_a_port_an_old_process_still_holds_is_waited_for_not_a_crash(launch_lab: LabHandle) -> None:
    # SGLang waits up to 30 s for a port (srt/utils/network.py wait_port_available) and logs that it does: a start
    # behind an old process that lets go of the port after 24 s is slow, not crashed
    assert gpuhost(launch_lab, "serve", "stop", "--all").returncode == 0
    hold = HOLD_PORT.replace("{address}", launch_lab.node("sgl").address)
    ct(launch_lab, f"nohup python3 -c {shlex.quote(hold)} >/dev/null 2>&1 &")
    r = gpuhost(launch_lab, "launch", "sglang")
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    assert re.search(r"CT 230: ready, KV \d+ tokens", text), text
    since = gpuhost(launch_lab, "serve", "logs").stdout
    assert "The port 30000 is in use, but we could not find the process that uses it." in since, since
