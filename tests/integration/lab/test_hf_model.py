"""``gpuhost launch sglang --tags install --tags model`` with a repo id: the weights come from the lab's Hugging Face Hub
stand-in on the node, downloaded in a fresh container by the real ``huggingface_hub`` (from the offline index), its
progress shown while it runs, and verified; a second run finds the snapshot complete; a truncated file is found and fetched again; a cache on a
too-small disk is refused before anything is downloaded; the token reaches the Hub and never the output.

One GPU node (its seed serves the package index and the Hub stand-in) and one container; no GPU driver is needed:
the tags leave out the steps that look at the GPUs and start the server. The tests run in order (one story).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gpuhost.lab import manager
from gpuhost.lab.hfhub.seed import REQUEST_LOG
from gpuhost.lab.sglang.model import MODEL_ID, NODE_DIR
from gpuhost.lab.spec import NodeSpec
from tests.integration.lab.test_gpu import MODEL as GPU_MODEL
from tests.integration.lab.test_gpu import ok
from tests.integration.lab.test_launch_sglang import PROFILES
from tests.lab_fixtures import CommandResult, LabHandle, lab_address, start_lab

CT = 231
TOKEN = "hf_labTokenNeverShown9c1e"
CONTROL = "/etc/gpuhost-lab/hfhub"
SRC = str(Path(__file__).resolve().parents[3] / "src")
CACHE = "/root/.cache/huggingface/hub/models--nvidia--GLM-5-NVFP4"


@pytest.fixture(scope="module")
def hf_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    state = tmp_path_factory.mktemp("hflab") / "state"
    handle = start_lab(
        state, [NodeSpec("hfn", lab_address(18, 1), boot="grub", cpu="amd", pve=8, gpus=2, gpu_model=GPU_MODEL)]
    )
    try:
        ok(
            handle,
            "hfn",
            f"pct create {CT} local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname llm "
            f"--memory 4096 --rootfs local-lvm:8 --unprivileged 0 && pct start {CT}",
            timeout=300,
        )
        ok(handle, "hfn", f"mkdir -p {CONTROL} && echo {TOKEN} > {CONTROL}/token")  # the repo is gated
        yield handle
    finally:
        handle.close()
        manager.down(state)


def write_inventory(lab: LabHandle, *, token: bool = True, **extra: Any) -> Path:
    yaml = YAML(typ="safe", pure=True)
    doc: dict[str, Any] = yaml.load(lab.inventory.read_text())
    (lab.state_dir / "profiles.yml").write_text(PROFILES)
    key = lab.state_dir / "hf-token"
    key.write_text(TOKEN + "\n")
    key.chmod(0o600)
    serve: dict[str, Any] = {"profile": "lab-glm5-tp2", "model": MODEL_ID, "host": lab.node("hfn").address}
    if token:
        serve["hf_token_file"] = "hf-token"
    doc["nodes"]["hfn"]["containers"] = {CT: {"hostname": "llm", "serve": serve}}
    doc["vars"].update(sglang_profile_dirs=[str(lab.state_dir / "profiles.yml")], **extra)
    path = lab.state_dir / "hf.yml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def ct(lab: LabHandle, command: str, timeout: float = 120) -> CommandResult:
    return lab.run("hfn", f"pct exec {CT} -- sh -c {shlex.quote(command)}", timeout)


def launch(lab: LabHandle, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200", "NO_COLOR": "1"}
    inventory = str(lab.state_dir / "hf.yml")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuhost",
            "launch",
            "sglang",
            "--tags",
            "install",
            "--tags",
            "model",
            *args,
            "-i",
            inventory,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )


def snapshot_sums(lab: LabHandle) -> dict[str, str]:
    out = ct(lab, f"cd {CACHE}/snapshots/* && sha256sum $(find . -type l -o -type f | sort)").stdout
    return {line.split()[1].removeprefix("./"): line.split()[0] for line in out.splitlines()}


def node_sums(lab: LabHandle) -> dict[str, str]:
    out = ok(lab, "hfn", f"cd {NODE_DIR} && sha256sum $(find . -type f | sort)")
    return {line.split()[1].removeprefix("./"): line.split()[0] for line in out.splitlines()}


def test_without_the_token_the_gated_repo_is_refused(hf_lab: LabHandle) -> None:
    write_inventory(hf_lab, token=False)
    r = launch(hf_lab)
    text = r.stdout + r.stderr
    assert r.returncode == 1, text
    assert "HTTP 401 GatedRepo" in text and "give hf_token_env or hf_token_file" in text
    assert ct(hf_lab, f"test -e {CACHE}/snapshots").rc == 1


def test_a_fresh_container_downloads_the_snapshot_with_huggingface_hub(hf_lab: LabHandle) -> None:
    write_inventory(hf_lab)
    r = launch(hf_lab)
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    assert f"download {MODEL_ID}@main with huggingface_hub: 14 of 14 files missing" in text
    # progress while it downloads: hf_fetch.py's byte counts, read as they stream from the container
    assert "[hfn/ct231] model download: started: 8.8 KiB to fetch (0 s)" in r.stderr.splitlines(), r.stderr
    done = r"\[hfn/ct231\] model download: 8\.8 KiB downloaded, [\d.]+ (B|KiB|MiB)/s average \(\d+ s\)"
    assert re.search(done, r.stderr), r.stderr
    assert "gpuhost-progress" not in text  # the tool's lines are progress, not output
    assert TOKEN not in text
    assert ct(hf_lab, "stat -c %a /etc/gpuhost/hf-token").stdout.strip() == "600"
    venv = "/opt/gpuhost/sglang/lab-glm5-tp2/venv/bin/python3"
    version = ct(hf_lab, f"{venv} -c 'import huggingface_hub; print(huggingface_hub.__version__)'")
    assert version.rc == 0 and version.stdout.strip(), version.stderr
    assert snapshot_sums(hf_lab) == node_sums(hf_lab)  # every file, byte for byte
    journal = ok(hf_lab, "hfn", f"cat {REQUEST_LOG}")
    assert "GET /nvidia/GLM-5-NVFP4/resolve/" in journal and TOKEN not in journal


def test_a_second_run_finds_the_snapshot_complete(hf_lab: LabHandle) -> None:
    r = launch(hf_lab, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert sum(int(h["changed"]) for h in report["hosts"].values()) == 0, r.stdout
    assert "complete (14 files" in r.stdout and TOKEN not in r.stdout + r.stderr


def test_a_truncated_file_is_found_and_downloaded_again(hf_lab: LabHandle) -> None:
    ct(hf_lab, f"truncate -s 100 $(readlink -f {CACHE}/snapshots/*/model.safetensors.index.json)")
    r = launch(hf_lab)
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    assert "1 wrong (model.safetensors.index.json: size 100, listed" in text
    assert snapshot_sums(hf_lab) == node_sums(hf_lab)
    index = hashlib.sha256(ok(hf_lab, "hfn", f"cat {NODE_DIR}/model.safetensors.index.json").encode()).hexdigest()
    assert snapshot_sums(hf_lab)["model.safetensors.index.json"] == index


def test_a_cache_on_a_too_small_disk_is_refused_before_downloading(hf_lab: LabHandle) -> None:
    mounted = ct(hf_lab, "mkdir -p /srv/small && mount -t tmpfs -o size=4k tmpfs /srv/small")
    if mounted.rc != 0:
        pytest.skip(f"the lab's container cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        write_inventory(hf_lab, sglang_hf_cache="/srv/small/hub")
        r = launch(hf_lab)
        text = r.stdout + r.stderr
        assert r.returncode == 1, text
        assert "to download, 4096 bytes (4.1 kB) free in /srv/small/hub; nothing was downloaded" in text, text
        assert ct(hf_lab, "test -e /srv/small/hub").rc == 1
    finally:
        ct(hf_lab, "umount /srv/small")
        write_inventory(hf_lab)
