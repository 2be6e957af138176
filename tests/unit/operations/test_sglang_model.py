"""Operation sglang_model: the snapshot in the target's Hugging Face cache against the repository's listing.

The listing comes from the lab's Hub stand-in (served in this process on a reserved loopback address), the fact's
real command (``tools/hf_fetch.py status`` and ``df``) runs on this machine, and the plan is made with a
ScenarioHost fed that command's output. The download itself runs the real ``huggingface_hub`` in a venv made from
the lab's wheel cache (``scripts/setup.sh`` fills it).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuhost.core.actions import RunCommand
from gpuhost.core.operation import SkipTask
from gpuhost.core.progress import ByteCount, count_line
from gpuhost.core.result import CommandResult
from gpuhost.errors import OperationFailed
from gpuhost.facts.serve import SnapshotState, hf_snapshot
from gpuhost.lab.hfhub import server as hub
from gpuhost.lab.pypi.seed import DEFAULT_WHEEL_CACHE, WHEEL_CACHE_ENV
from gpuhost.lab.sglang.model import MODEL_ID, write_snapshot
from gpuhost.operations.sglang import ModelArgs, SglangModel
from gpuhost.tools import hf_fetch
from tests.lab_fixtures import lab_address
from tests.support.scenario import ScenarioHost

TOKEN = "hf_unitTokenDoNotPrint4242"


@dataclass
class Hub:
    url: str
    repo: hub.Repo
    control: Path


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hub")
    repo = hub.Repo(MODEL_ID, write_snapshot(root / "repo"))
    hub.REPOS[MODEL_ID] = repo
    control = root / "control"
    control.mkdir()
    saved = hub.CONTROL_DIR
    hub.CONTROL_DIR = str(control)
    address = lab_address(17, 1)
    server = ThreadingHTTPServer((address, 0), hub.Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Hub(f"http://{address}:{server.server_address[1]}", repo, control)
    finally:
        server.shutdown()
        server.server_close()
        hub.CONTROL_DIR = saved
        hub.REPOS.pop(MODEL_ID, None)


@pytest.fixture(autouse=True)
def no_controls(stand_in: Hub) -> Iterator[None]:
    yield
    for f in stand_in.control.iterdir():
        f.unlink()
    hub.DROPPED.clear()


def args_for(hub_: Hub, cache: Path, token_file: str | None = None, python: str = "python3") -> ModelArgs:
    return ModelArgs(repo=MODEL_ID, cache_dir=str(cache), endpoint=hub_.url, python=python, token_file=token_file)


def sh(command: str, env: dict[str, str] | None = None) -> CommandResult:
    r = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300, env=env)
    return CommandResult(command, r.returncode, r.stdout, r.stderr)


def plan_on_this_machine(a: ModelArgs, *, check: bool = False, records: Path):  # type: ignore[no-untyped-def]
    """The fact's real command run here (its record dir redirected), then the plan from its output."""
    key = (a.repo, a.revision, a.cache_dir, a.endpoint, a.token_file)
    command = hf_snapshot.command(*key).replace("/var/lib/gpuhost/sglang/models", str(records))
    host = ScenarioHost({(hf_snapshot, key): sh(command)}, check=check)
    return SglangModel(a).plan(host)


def fill(cache: Path, repo: hub.Repo) -> Path:
    """The cache layout huggingface_hub writes: blobs by ETag, the snapshot's files linked to them, refs/main."""
    base = cache / f"models--{MODEL_ID.replace('/', '--')}"
    snap = base / "snapshots" / repo.sha
    for rel, entry in repo.files.items():
        blob = base / "blobs" / str(entry["etag"])
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo.root / rel, blob)
        link = snap / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (base / "refs").mkdir(exist_ok=True)
    (base / "refs" / "main").write_text(repo.sha)
    return snap


def test_an_empty_cache_plans_the_download_of_every_file(stand_in: Hub, tmp_path: Path) -> None:
    plan = plan_on_this_machine(args_for(stand_in, tmp_path / "hub"), records=tmp_path / "rec")
    assert plan.changes and "14 of 14 files missing" in plan.reason
    assert f"download {MODEL_ID}@main with huggingface_hub" in plan.reason
    (action,) = plan.actions
    assert isinstance(action, RunCommand) and " fetch --repo nvidia/GLM-5-NVFP4 " in action.command


def test_a_complete_snapshot_is_ok_with_the_reason(stand_in: Hub, tmp_path: Path) -> None:
    fill(tmp_path / "hub", stand_in.repo)
    plan = plan_on_this_machine(args_for(stand_in, tmp_path / "hub"), records=tmp_path / "rec")
    assert not plan.changes, plan.reason
    assert f"snapshot {stand_in.repo.sha[:12]} complete (14 files" in plan.reason
    assert "8 LFS files by sha256" in plan.reason


def test_a_truncated_and_a_corrupted_file_are_found(stand_in: Hub, tmp_path: Path) -> None:
    snap = fill(tmp_path / "hub", stand_in.repo)
    (snap / "config.json").resolve().write_text("{}")  # shorter than listed
    corrupt = (snap / "model-00003-of-00008.safetensors").resolve()
    data = corrupt.read_bytes()
    corrupt.write_bytes(data[:-1] + b"X")  # same size, another sha256 (all shards share this blob)
    plan = plan_on_this_machine(args_for(stand_in, tmp_path / "hub"), records=tmp_path / "rec")
    assert plan.changes
    assert "0 of 14 files missing" in plan.reason and "9 wrong (config.json: size 2, listed" in plan.reason
    assert "model-00001-of-00008.safetensors: sha256" in plan.reason


def test_too_little_free_space_fails_before_anything_is_downloaded() -> None:
    a = ModelArgs(repo=MODEL_ID, cache_dir="/root/.cache/huggingface/hub", python="/v/bin/python3")
    key = (a.repo, a.revision, a.cache_dir, a.endpoint, a.token_file)
    status = {"commit": "ab" * 20, "files": 3, "missing": ["a", "b"], "wrong": [], "missing_bytes": 433_000_000_000}
    host = ScenarioHost({(hf_snapshot, key): SnapshotState(status, avail=12_000_000_000)})
    with pytest.raises(OperationFailed) as exc:
        SglangModel(a).plan(host)
    text = str(exc.value)
    assert "433000000000 bytes (433.0 GB) to download, 12000000000 bytes (12.0 GB) free" in text
    assert "/root/.cache/huggingface/hub" in text and "nothing was downloaded" in text


def test_the_free_space_is_what_df_shows(stand_in: Hub, tmp_path: Path) -> None:
    """The free space of the nearest existing parent, as df shows it. df is asked just before and just after the
    fact's command, since other processes writing to the same file system (the suite's other workers) move it
    in between: the figure must lie within what df showed around it, give or take 64 MiB."""

    def avail() -> int:
        df = subprocess.run(["df", "-B1", "--output=avail", str(tmp_path)], capture_output=True, text=True).stdout
        return int(df.split()[-1])

    a = args_for(stand_in, tmp_path / "not" / "made" / "yet")
    key = (a.repo, a.revision, a.cache_dir, a.endpoint, a.token_file)
    before = avail()
    state = hf_snapshot.parse(sh(hf_snapshot.command(*key)), *key)
    after = avail()
    slack = 64 * 1024 * 1024
    assert state.avail is not None
    assert min(before, after) - slack <= state.avail <= max(before, after) + slack, (before, state.avail, after)


def test_a_gated_repo_needs_the_token_which_is_never_in_the_command(stand_in: Hub, tmp_path: Path) -> None:
    (stand_in.control / "token").write_text(TOKEN)
    with pytest.raises(OperationFailed, match="HTTP 401 GatedRepo .*give hf_token_env or hf_token_file"):
        plan_on_this_machine(args_for(stand_in, tmp_path / "hub"), records=tmp_path / "rec")
    with pytest.raises(SkipTask, match="check mode: .* cannot be listed yet"):
        plan_on_this_machine(args_for(stand_in, tmp_path / "hub"), check=True, records=tmp_path / "rec")
    token_file = tmp_path / "hf-token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o644)
    with pytest.raises(OperationFailed, match="readable by others"):
        plan_on_this_machine(args_for(stand_in, tmp_path / "hub", str(token_file)), records=tmp_path / "rec")
    token_file.chmod(0o600)
    plan = plan_on_this_machine(args_for(stand_in, tmp_path / "hub", str(token_file)), records=tmp_path / "rec")
    assert plan.changes and TOKEN not in plan.reason
    assert TOKEN not in plan.actions[0].command and f"--token-file {token_file}" in plan.actions[0].command  # type: ignore[union-attr]


# -- the download, with the real huggingface_hub ---------------------------------------------------


@pytest.fixture(scope="module")
def hf_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    cache = Path(os.environ.get(WHEEL_CACHE_ENV, DEFAULT_WHEEL_CACHE))
    if not list(cache.glob("huggingface_hub-*.whl")):
        pytest.skip(f"no huggingface_hub wheel in {cache} (scripts/setup.sh caches it)")
    venv = tmp_path_factory.mktemp("hfvenv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index"]
    subprocess.run([*pip, "--find-links", str(cache), "huggingface_hub"], check=True, timeout=300)
    return str(venv / "bin/python")


def fetch(plan_action: RunCommand, records: Path) -> tuple[dict[str, object], CommandResult]:
    r = sh(plan_action.command.replace("/var/lib/gpuhost/sglang/models", str(records)))
    return json.loads(r.stdout.strip().splitlines()[-1]), r


def test_download_verify_rerun_truncation_and_a_dropped_connection(
    stand_in: Hub, hf_python: str, tmp_path: Path
) -> None:
    (stand_in.control / "token").write_text(TOKEN)
    (stand_in.control / "drop_after").write_text("16")  # each file's first download is cut off
    token_file = tmp_path / "hf-token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    cache, records = tmp_path / "hub", tmp_path / "rec"
    a = args_for(stand_in, cache, str(token_file), python=hf_python)
    plan = plan_on_this_machine(a, records=records)
    assert plan.actions[0].progress == ByteCount("model download")  # type: ignore[union-attr]
    out, r = fetch(plan.actions[0], records)  # type: ignore[arg-type]
    assert r.exit_code == 0, r.stdout + r.stderr
    assert out["complete"] and out["downloaded"] and out["files"] == 14 and out["huggingface_hub"]
    counts = [c for c in map(count_line, r.stdout.splitlines()) if c]  # the bytes in the cache, start to end
    assert counts[0][:2] == (0, out["downloaded_bytes"]) and counts[-1][:2] == (out["downloaded_bytes"],) * 2
    assert [c[0] for c in counts] == sorted(c[0] for c in counts)
    assert "Trying to resume download" in r.stderr  # huggingface_hub retried the cut-off files
    assert TOKEN not in r.stdout + r.stderr
    snap = Path(str(out["snapshot"]))
    assert (snap / "config.json").read_bytes() == (stand_in.repo.root / "config.json").read_bytes()
    assert (cache / "models--nvidia--GLM-5-NVFP4" / "refs" / "main").read_text() == stand_in.repo.sha
    again = plan_on_this_machine(a, records=records)
    assert not again.changes and "complete" in again.reason
    blob = (snap / "model-00005-of-00008.safetensors").resolve()
    blob.write_bytes(blob.read_bytes()[:20])  # truncated
    plan = plan_on_this_machine(a, records=records)
    assert plan.changes and "model-00001-of-00008.safetensors: size 20, listed 40" in plan.reason
    out, r = fetch(plan.actions[0], records)  # type: ignore[arg-type]
    assert r.exit_code == 0 and out["complete"], r.stdout + r.stderr
    assert any("downloaded again" in str(s) for s in out["set_aside"])  # type: ignore[attr-defined]
    assert blob.read_bytes() == (stand_in.repo.root / "model-00005-of-00008.safetensors").read_bytes()
    assert not plan_on_this_machine(a, records=records).changes


def test_fetch_refuses_when_the_disk_is_too_small(stand_in: Hub, hf_python: str, tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a small tmpfs needs root and unshare")
    small = tmp_path / "small"
    small.mkdir()
    a = args_for(stand_in, small / "hub", python=hf_python)
    plan = plan_on_this_machine(a, records=tmp_path / "rec")
    command = plan.actions[0].command.replace("/var/lib/gpuhost/sglang/models", str(tmp_path / "rec"))  # type: ignore[union-attr]
    # a private mount namespace with a 4 KiB tmpfs where the cache goes: the listing's 7 kB do not fit
    r = sh(f"unshare -m sh -c {shlex.quote(f'mount -t tmpfs -o size=4k tmpfs {small} && {command}')}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.exit_code == 3, r.stdout + r.stderr
    assert "bytes to download" in out["error"] and "free; nothing was downloaded" in out["error"]


def test_the_bytes_on_disk_count_downloads_under_way_but_not_a_partial_file_left_before(tmp_path: Path) -> None:
    """What the progress lines count, in the cache layout huggingface_hub 2.4 writes (blobs by etag, a download
    under way as ``<etag>.<hex>.incomplete``, a partial file of an earlier process left as it was)."""
    blobs = tmp_path / "models--nvidia--GLM-5-NVFP4" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / "aaaa.0f3c9e21.incomplete").write_bytes(bytes(700))  # an earlier, killed run: not resumed by 2.x
    measure = hf_fetch.OnDisk(str(tmp_path), MODEL_ID, {"aaaa": 1000, "bbbb": 50})
    assert measure() == 0
    (blobs / "aaaa.77d1a0b4.incomplete").write_bytes(bytes(300))  # this run's download of the same blob
    (blobs / "bbbb").write_bytes(bytes(50))  # another one, complete
    assert measure() == 350
    with (blobs / "aaaa.0f3c9e21.incomplete").open("ab") as fh:  # an old partial file that grows is resumed
        fh.write(bytes(100))
    assert measure() == 850
    (blobs / "aaaa").write_bytes(bytes(1000))
    assert measure() == 1050
