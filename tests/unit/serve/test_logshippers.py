"""The log normaliser's shipper table, one test per shipper on a real capture of its prefix
(tests/fixtures/logshippers and tests/fixtures/sglang/logs-round2, see their SOURCE.md), and the promise that
matters: a crash log wrapped by any shipper gives the same findings as the bare log."""

import re
from pathlib import Path

import pytest

from gpuhost.serve.logscan import scan_text
from gpuhost.serve.logscan.normalize import SHIPPERS, read_line

FIX = Path(__file__).resolve().parents[2] / "fixtures"
SHIP = FIX / "logshippers"
R2 = FIX / "sglang" / "logs-round2"
LOGS = FIX / "sglang" / "logs"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


# shipper → (capture, line index, the message a reader sees, shippers removed outermost first)
CASES = {
    "kubernetes-cri": (
        SHIP / "kubernetes-cri_langgraph-traceback_excerpt.txt",
        2,
        "Traceback (most recent call last):",
        ("kubernetes-cri",),
    ),
    # a second runtime's CRI file (CRI-O on OpenShift): nanoseconds and a "+00:00" offset, not "Z"
    "kubernetes-cri-o": (
        SHIP / "cri-o-3181-openshift-alertmanager-proxy_excerpt.txt",
        0,
        "2020/01/26 03:17:29 provider.go:117: Defaulting client-id to system:serviceaccount:openshift-monitoring:"
        "alertmanager-main",
        ("kubernetes-cri",),
    ),
    "docker-compose": (
        SHIP / "docker-compose_uvicorn-traceback_excerpt.txt",
        3,
        'File "/usr/local/bin/uvicorn", line 8, in <module>',
        ("docker-compose",),
    ),
    "docker-compose-v1": (
        SHIP / "docker-compose_v1-backend-traceback_excerpt.txt",
        3,
        "sqlite3.OperationalError: no such table: stocks",
        ("docker-compose",),
    ),
    "github-actions": (
        R2 / "flashinfer-1892-jit-capture-gha-timestamps.log",
        1,
        ") = self.capture_one_batch_size(bs, forward)",
        ("github-actions", "torch-rank"),
    ),
    "github-actions-runner": (
        SHIP / "github-actions_conda-forge-pytorch-309-exit-137.txt",
        0,
        "##[error]Process completed with exit code 137.",
        ("github-actions",),
    ),
    "pipe-logger": (
        R2 / "transformerlab-381-flashinfer-ninja-missing-pipe-logger.log",
        26,
        "Received sigquit from a child process. It usually means the child failed.",
        ("pipe-logger",),
    ),
    # FastChat's build_logger around a worker's stderr ("ts | ERROR | stderr | "), a second pipe-style source
    "pipe-logger-fastchat-stderr": (
        R2 / "sglang-167-fastchat-worker-no-zmq-pipe-logger.log",
        10,
        "ModuleNotFoundError: No module named 'zmq'",
        ("pipe-logger",),
    ),
    "quoted": (
        SHIP / "quoted_sglang-18785-prefill.txt",
        0,
        "Prefill batch, #new-seq: 5, #new-token: 8192, #cached-token: 159358, token usage: 0.13, #running-req: 18, "
        "#queue-req: 5,",
        ("quoted", "sglang"),
    ),
    "quoted-twice": (
        SHIP / "quoted-twice_xorbits-1622-vllm-ray.txt",
        1,
        "vLLM is using nccl==2.20.5（RayWorkerWrapper pid=16720）INFO 06-19 06：19：29 pynccl.py:65] vLLM 正在使用 "
        "nccl==2.20.5",
        ("quoted", "ray", "vllm"),
    ),
    "vllm": (
        SHIP / "vllm_kserve-4565-enginecore-ninja.txt",
        1,
        "Traceback (most recent call last):",
        ("vllm",),
    ),
    "ray": (
        R2 / "slime-1314-flashinfer-ninja-calledprocesserror-ray.log",
        1,
        "Scheduler hit an exception: Traceback (most recent call last):",
        ("ray", "sglang"),
    ),
    "glog": (
        R2 / "sglang-3892-ima-nccl-watchdog.log",
        0,
        "[PG ID 2 PG GUID 3 Rank 3] Process group watchdog thread terminated with exception: CUDA error: an illegal "
        "memory access was encountered",
        ("torch-rank", "glog"),
    ),
    "python-logging-dash": (
        R2 / "flashinfer-920-rmsnorm-no-kernel-image-trtllm.log",
        0,
        "Loading JIT ops: norm",
        ("python-logging-dash",),
    ),
    "journald-and-sglang": (
        LOGS / "sglang-19408-glm-moe-dsa-keyerror.log",
        0,
        None,  # checked below: only that SGLang's "[ts] ERROR:" prefix is gone
        ("sglang", "level-name"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_shipper_prefix_comes_off(case: str):
    path, index, want, shippers = CASES[case]
    msg = read_line(_lines(path)[index])
    assert msg.shippers == shippers
    if want is not None:
        assert msg.text == want


def test_every_shipper_has_a_capture_or_a_stated_reason():
    covered = {s for _, _, _, names in CASES.values() for s in names}
    # journald: no capture in the corpus; the literal line below (and test_logscan_signatures) covers it
    assert {s.name for s in SHIPPERS} - covered == {"journald"}


def test_journald_prefix_from_the_existing_corpus():
    # tests/fixtures/sglang/logs has no journald capture; the unit line in test_logscan_signatures covers it
    assert read_line(
        "Dec 01 10:00:00 gpu1 sglang[4242]: [2026-12-01 10:00:00 TP0] KV Cache is allocated."
    ).shippers == (
        "journald",
        "sglang",
    )


# The prefix of one real line of each shipper, cut from the captures above (everything before the message).
def _prefix(case: str) -> str:
    path, index, _, _ = CASES[case]
    line = _lines(path)[index]
    text = read_line(line).text
    return line[: line.index(text)] if text else line


WRAPPERS = [
    "kubernetes-cri",
    "kubernetes-cri-o",
    "docker-compose",
    "docker-compose-v1",
    "github-actions",
    "github-actions-runner",
    "pipe-logger",
    "pipe-logger-fastchat-stderr",
    "quoted",
    "quoted-twice",
    "vllm",
    "ray",
    "glog",
    "python-logging-dash",
]

CRASHES = [
    LOGS / "sglang-5285-capture-oom.log",
    R2 / "sglang-4205-capture-gloo-connection-closed.log",
    R2 / "sglang-748-capture-no-kernel-image-sm75.log",
    R2 / "sglang-5491-ima-flashinfer-prefill-kernel.log",
    LOGS / "sglang-1693-nccl-watchdog-timeout.log",
]


def _findings(text: str) -> list[tuple[str, str, str, str | None, str | None]]:
    return [
        (h.finding.check, h.finding.level.name, h.finding.message, h.finding.cause, h.finding.fix)
        for h in scan_text(text).report()
    ]


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("crash", CRASHES, ids=lambda p: p.name)
def test_a_wrapped_crash_gives_the_same_findings_as_the_bare_log(wrapper: str, crash: Path):
    prefix = _prefix(wrapper)
    assert prefix and not re.fullmatch(r"\s*", prefix)
    bare = crash.read_text()
    wrapped = "".join(prefix + line + "\n" for line in bare.splitlines())
    want = _findings(bare)
    assert want  # every crash here has findings
    assert _findings(wrapped) == want


def test_every_line_of_the_second_cri_and_pipe_captures_loses_its_prefix():
    cri = _lines(SHIP / "cri-o-3181-openshift-alertmanager-proxy_excerpt.txt")
    assert [read_line(line).shippers for line in cri] == [("kubernetes-cri",)] * 5
    assert all(read_line(line).text.startswith("2020/01/26 03:17:29 ") for line in cri)
    pipe = _lines(R2 / "sglang-167-fastchat-worker-no-zmq-pipe-logger.log")
    # eleven lines under FastChat's logger, then slurm's own line without a prefix
    assert [read_line(line).shippers for line in pipe] == [("pipe-logger",)] * 11 + [()]
    assert read_line(pipe[0]).text == "Traceback (most recent call last):"
    assert read_line(pipe[-1]).text == "srun: error: haicluster2: task 0: Exited with exit code 1"
