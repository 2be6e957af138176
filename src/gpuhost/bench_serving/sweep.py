"""The sweep: SGLang's own benchmark client once per concurrency level on the target, the GPUs sampled meanwhile.

On the target (a container on a node, or the node itself) where ``gpuhost launch sglang`` left its state
(:data:`gpuhost.facts.serve_layout.STATE_FILE`):

1. the GPU sampler (:mod:`gpuhost.bench_serving.sampler`) is shipped and started in the background for the whole
   sweep (:func:`gpuhost.connection.shipped_tool.start_tool`), and stopped in a ``finally`` whatever happens;
2. each level runs ``python -m sglang.benchmark.serving`` (``sglang.bench_serving`` before 0.5.15) from the
   launched profile's venv through :mod:`gpuhost.tools.bench_level`, with a fixed offline dataset (``random-ids``
   with the checkpoint's own tokenizer, or a local file), warm-up requests first and its ``--output-file`` JSONL;
   the tool records the target's wall clock just before and after, the same clock as the samples' ``t_wall``;
3. each level's window is the benchmark's own run (its end minus its measured duration, so the warm-up and the
   client's start are left out), and its GPU statistics are the samples in it.

Everything is kept under the run directory on the controller: per level its output (``cN.log``) and JSONL
(``cN.jsonl``), the samples (``samples.jsonl``), ``result.json``, ``table.txt`` and ``sweep.png``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuhost.bench_serving.compare import compare
from gpuhost.bench_serving.findings import all_findings
from gpuhost.bench_serving.parse import BenchResult, parse_level
from gpuhost.bench_serving.results import LevelRun, build_document, summarise, write_run_dir
from gpuhost.bench_serving.samples import SampleSeries, read_samples
from gpuhost.bench_serving.scrub import scrub_level
from gpuhost.checks.finding import Level, worst
from gpuhost.connection.base import Connection
from gpuhost.connection.shipped_tool import BackgroundTool, run_tool, start_tool, target_of
from gpuhost.errors import GpuhostError
from gpuhost.facts import serve_layout
from gpuhost.resources import read_tool
from gpuhost.serve.flagtable import version_key

#: the client module moved in SGLang 0.5.15 (the old one stays as a deprecated alias for a while)
NEW_CLIENT_FROM = "0.5.15"
MAX_CONCURRENCY = 65536
MAX_LEVELS = 32
DEFAULT_INPUT_LEN = 1024
DEFAULT_OUTPUT_LEN = 1024
MIN_PROMPTS = 8
ROUNDS = 3  # default prompts per level: three rounds of the level's concurrency


class SweepError(GpuhostError):
    """The sweep cannot run on this target (nothing launched there, no venv)."""


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"1,64,256"`` as sorted levels; raises :class:`ValueError` with the reason (empty, not a positive integer,
    a duplicate, too many)."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise ValueError(f"--concurrency {text!r}: a comma list of positive integers, e.g. 1,64,256")
    levels = []
    for t in items:
        if not re.fullmatch(r"[0-9]+", t) or int(t) < 1:
            raise ValueError(f"--concurrency: {t!r} is not a positive integer")
        if int(t) > MAX_CONCURRENCY:
            raise ValueError(f"--concurrency: {t} is more than {MAX_CONCURRENCY}")
        levels.append(int(t))
    dupes = sorted({c for c in levels if levels.count(c) > 1})
    if dupes:
        raise ValueError(f"--concurrency: {', '.join(map(str, dupes))} given twice")
    if len(levels) > MAX_LEVELS:
        raise ValueError(f"--concurrency: {len(levels)} levels, at most {MAX_LEVELS}")
    return tuple(sorted(levels))


@dataclass(frozen=True)
class SweepPlan:
    """What to run: the levels and the fixed dataset every level uses."""

    concurrencies: tuple[int, ...]
    input_len: int = DEFAULT_INPUT_LEN
    output_len: int = DEFAULT_OUTPUT_LEN
    prompts_per_level: int | None = None
    warmup_requests: int = 2
    dataset: str = "random-ids"  # or a local file on the controller (ShareGPT format), shipped to the target
    tokenizer: str | None = None  # default: the launched checkpoint
    seed: int = 1
    sample_interval_ms: int = 500
    level_timeout_s: float = 3600.0

    def prompts(self, concurrency: int) -> int:
        return self.prompts_per_level or max(MIN_PROMPTS, ROUNDS * concurrency)

    def check(self) -> None:
        """Raise :class:`ValueError` for a plan that cannot run."""
        if not self.concurrencies:
            raise ValueError("no concurrency level")
        for name, value in (("--input-len", self.input_len), ("--output-len", self.output_len)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        if self.prompts_per_level is not None and self.prompts_per_level < 1:
            raise ValueError(f"--prompts-per-level must be at least 1, not {self.prompts_per_level}")
        if self.warmup_requests < 0:
            raise ValueError("--warmup-requests must not be negative")
        if not 50 <= self.sample_interval_ms <= 500:
            raise ValueError("--sample-interval-ms must be 50..500 (at least 2 samples a second)")
        if self.dataset != "random-ids" and not Path(self.dataset).is_file():
            raise ValueError(f"--dataset {self.dataset}: not random-ids and not a readable local file")


def client_module(sglang_version: str | None) -> str:
    """``sglang.benchmark.serving`` from 0.5.15 on, ``sglang.bench_serving`` before (unknown: the new one)."""
    if sglang_version and version_key(sglang_version) < version_key(NEW_CLIENT_FROM):
        return "sglang.bench_serving"
    return "sglang.benchmark.serving"


def client_args(plan: SweepPlan, concurrency: int, launched: dict[str, Any], dataset_path: str | None) -> list[str]:
    """The benchmark client's arguments for one level (``--output-file`` is added on the target)."""
    model = str(launched.get("model") or "")
    args = ["--backend", "sglang", "--base-url", str(launched["url"])]
    if launched.get("served_model"):
        args += ["--model", str(launched["served_model"])]
    tokenizer = plan.tokenizer or model
    if tokenizer:
        args += ["--tokenizer", tokenizer]
    if dataset_path is None:
        args += ["--dataset-name", "random-ids"]
    else:
        args += ["--dataset-name", "sharegpt", "--dataset-path", dataset_path]
    args += [
        "--random-input-len",
        str(plan.input_len),
        "--random-output-len",
        str(plan.output_len),
        "--random-range-ratio",
        "1.0",
        "--sharegpt-output-len",
        str(plan.output_len),
        "--num-prompts",
        str(plan.prompts(concurrency)),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--warmup-requests",
        str(plan.warmup_requests),
        "--seed",
        str(plan.seed),
        "--disable-tqdm",
    ]
    return args


def level_window(t0: float, t1: float, duration_s: Any) -> tuple[float, float]:
    """The benchmark's own run inside the client's lifetime ``[t0, t1]`` (target clock): it ends at ``t1`` and
    lasted ``duration_s`` (the warm-up and the client's start are before it); without a duration, all of it."""
    if isinstance(duration_s, (int, float)) and not isinstance(duration_s, bool) and 0 < duration_s <= t1 - t0:
        return t1 - float(duration_s), t1
    return t0, t1


@dataclass
class LevelOutcome:
    concurrency: int
    result: BenchResult
    t0: float | None
    t1: float | None
    rc: int | None
    start_wall: float | None = None
    end_wall: float | None = None


@dataclass
class SweepOutcome:
    run_dir: Path
    document: dict[str, Any]
    paths: dict[str, Path]
    levels: list[LevelOutcome] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 ok, 1 a failed level or a regression (any FAIL finding)."""
        failed = any(lv.result.status == "failed" for lv in self.levels)
        regression = (self.document.get("comparison") or {}).get("verdict") == "regression"
        return 1 if failed or regression or self.document["verdict"] == Level.FAIL.word else 0


def default_run_dir(base: Path, node: str, ctid: int | None, now: datetime | None = None) -> Path:
    stamp = (now or datetime.now()).strftime("%Y%m%dT%H%M%S")
    where = f"{node}-ct{ctid}" if ctid is not None else node
    return base / f"{stamp}-{where}"


def read_launched(target: Connection) -> dict[str, Any]:
    """The launched server's state on the target; :class:`SweepError` when gpuhost launched nothing there."""
    text = target.read_file(serve_layout.STATE_FILE)
    if text is None:
        raise SweepError(f"{target.name}: no {serve_layout.STATE_FILE}: run `gpuhost launch sglang` first")
    try:
        launched = json.loads(text)
    except ValueError:
        raise SweepError(f"{target.name}: {serve_layout.STATE_FILE} is not JSON") from None
    if not isinstance(launched, dict) or not launched.get("url") or not launched.get("profile"):
        raise SweepError(f"{target.name}: {serve_layout.STATE_FILE} names no profile and URL")
    return launched


def _sampler_source() -> bytes:
    return (Path(__file__).with_name("sampler.py")).read_bytes()


def run_sweep(
    conn: Connection,
    plan: SweepPlan,
    run_dir: Path,
    *,
    ctid: int | None = None,
    baseline: dict[str, Any] | None = None,
    subject: str | None = None,
    progress: Callable[[str], None] = lambda _m: None,
    plot: bool = True,
) -> SweepOutcome:
    """Run every level of ``plan`` against the server launched on ``conn`` (or its container ``ctid``)."""
    plan.check()
    target = target_of(conn, ctid)
    subject = subject or target.name
    launched = read_launched(target)
    venv = serve_layout.venv_dir(str(launched["profile"]))
    python = f"{venv}/bin/python"
    if target.run(["test", "-x", python], check=False, timeout=60).exit_code != 0:
        raise SweepError(f"{subject}: {python} is missing: the launched profile's venv is gone")
    module = client_module(str(launched.get("sglang") or "") or None)
    run_dir.mkdir(parents=True, exist_ok=True)

    dataset_path: str | None = None
    work: str | None = None
    sampler: BackgroundTool | None = None
    levels: list[LevelOutcome] = []
    samples_text = ""
    try:
        if plan.dataset != "random-ids":
            work = target.run('mktemp -d "${TMPDIR:-/tmp}/gpuhost-bench.XXXXXX"', timeout=60).stdout.strip()
            dataset_path = f"{work}/{Path(plan.dataset).name}"
            target.put_file(dataset_path, Path(plan.dataset), mode=0o644)
        progress(f"{subject}: sampling the GPUs every {plan.sample_interval_ms} ms")
        sampler = start_tool(
            conn,
            _sampler_source(),
            ["--interval-ms", str(plan.sample_interval_ms)],
            name="gpu_sampler.py",
            ctid=ctid,
        )
        for c in plan.concurrencies:
            progress(f"{subject}: level c{c}: {plan.prompts(c)} prompts of {plan.input_len}+{plan.output_len} tokens")
            outcome = _run_level(conn, ctid, plan, c, launched, python, module, dataset_path)
            jsonl, log = scrub_level(outcome[2], outcome[1])  # server_info echoes the API key (twice)
            (run_dir / f"c{c}.log").write_text(log, encoding="utf-8")
            if jsonl is not None:
                (run_dir / f"c{c}.jsonl").write_text(jsonl, encoding="utf-8")
            levels.append(outcome[0])
            r = outcome[0].result
            progress(
                f"{subject}: level c{c}: {r.status}, {_shown(r.figures.get('output_throughput_tok_s'))} output tok/s, "
                f"median TTFT {_shown(r.figures.get('median_ttft_ms'))} ms"
            )
    finally:
        if sampler is not None:
            samples_text = sampler.stop()
            (run_dir / "samples.jsonl").write_text(samples_text, encoding="utf-8")
        if work:
            try:
                target.run(["rm", "-rf", "--", work], check=False, timeout=60)
            except GpuhostError:
                pass

    series: SampleSeries = read_samples(samples_text)
    runs = [
        LevelRun(concurrency=lv.concurrency, result=lv.result, start_wall=lv.start_wall, end_wall=lv.end_wall)
        for lv in levels
    ]
    summaries = summarise(runs, series)
    doc = build_document(summaries, [], samples=series, target=subject)
    doc["plan"] = {
        "concurrency": list(plan.concurrencies),
        "input_len": plan.input_len,
        "output_len": plan.output_len,
        "prompts": {f"c{c}": plan.prompts(c) for c in plan.concurrencies},
        "warmup_requests": plan.warmup_requests,
        "dataset": "random-ids" if plan.dataset == "random-ids" else Path(plan.dataset).name,
        "seed": plan.seed,
        "sample_interval_ms": plan.sample_interval_ms,
        "client": module,
        "profile": launched.get("profile"),
        "sglang": launched.get("sglang"),
        "clock": "target wall clock (time.time()) for the samples and the level windows",
    }
    for lv_doc, lv in zip(doc["levels"], levels, strict=True):
        lv_doc["client_started"], lv_doc["client_ended"], lv_doc["client_rc"] = lv.t0, lv.t1, lv.rc
    comparison = compare(doc, baseline) if baseline is not None else None
    findings = all_findings(summaries, comparison, subject)
    doc["comparison"] = comparison
    doc["findings"] = [f.to_json() for f in findings]
    doc["verdict"] = worst(findings).word
    paths = write_run_dir(run_dir, doc, plot=plot)
    paths["samples"] = run_dir / "samples.jsonl"
    return SweepOutcome(run_dir, doc, paths, levels)


def _run_level(
    conn: Connection,
    ctid: int | None,
    plan: SweepPlan,
    concurrency: int,
    launched: dict[str, Any],
    python: str,
    module: str,
    dataset_path: str | None,
) -> tuple[LevelOutcome, str, str | None]:
    args = [
        "--python",
        python,
        "--module",
        module,
        "--env-file",
        serve_layout.ENV_FILE,
        "--timeout",
        f"{plan.level_timeout_s:g}",
        "--",
        *client_args(plan, concurrency, launched, dataset_path),
    ]
    out = run_tool(
        conn,
        read_tool("bench_level.py").encode(),
        args,
        name="bench_level.py",
        ctid=ctid,
        timeout=plan.level_timeout_s + 120,
    )
    data = out.data if isinstance(out.data, dict) else {}
    text = str(data.get("output") or "")
    jsonl = data.get("jsonl") if isinstance(data.get("jsonl"), str) else None
    rc = data.get("rc") if isinstance(data.get("rc"), int) else None
    result = parse_level(text, jsonl)
    if rc not in (0, None) and result.status != "failed":
        result.notes.append(f"the client exited {rc}")
    sent, done = plan.prompts(concurrency), result.figures.get("successful_requests")
    if result.status != "failed" and isinstance(done, int) and done < sent:
        # bench_serving counts only the successes; the sweep knows how many it sent
        result.notes.append(f"{sent - done} of {sent} requests failed")
        if not isinstance(result.extra.get("error_count"), int):
            result.extra["error_count"] = sent - done
    t0 = float(data["t0"]) if isinstance(data.get("t0"), (int, float)) else None
    t1 = float(data["t1"]) if isinstance(data.get("t1"), (int, float)) else None
    lv = LevelOutcome(concurrency, result, t0, t1, rc)
    if t0 is not None and t1 is not None:
        lv.start_wall, lv.end_wall = level_window(t0, t1, result.figures.get("duration_s"))
    return lv, text, jsonl


def _shown(value: object) -> str:
    """A level's figure for its live line: one decimal (the client's own float has a dozen), ``-`` when absent."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.1f}"
    return "-"
