"""SGLang's serving benchmark: real HTTP requests at a concurrency, its result block and JSONL line."""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from . import config, tokenizer
from .startup import VERSION

NEW = VERSION >= (0, 5, 15)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Benchmark the online serving throughput.")
    p.add_argument(
        "--backend",
        default="sglang",
        choices=["sglang", "sglang-native", "sglang-oai", "sglang-oai-chat", "vllm", "lmdeploy"],
    )
    p.add_argument("--base-url", default=None)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=None)
    p.add_argument(
        "--dataset-name",
        default="sharegpt",
        choices=[
            "agentic-trace",
            "sharegpt",
            "custom",
            "openai",
            "random",
            "random-ids",
            "generated-shared-prefix",
            "mmmu",
            "image",
            "mooncake",
            "longbench_v2",
            "speed-bench",
        ],
    )
    p.add_argument("--dataset-path", default="")
    p.add_argument("--model", default=None)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=1024)
    p.add_argument("--random-range-ratio", type=float, default=0.0)
    p.add_argument("--sharegpt-output-len", type=int, default=None)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--output-file", default=None)
    p.add_argument("--output-details", action="store_true")
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--disable-stream", action="store_true")
    p.add_argument("--disable-ignore-eos", action="store_true")
    p.add_argument("--extra-request-body", default=None)
    p.add_argument("--apply-chat-template", action="store_true")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--flush-cache", action="store_true")
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--tag", default=None)
    p.add_argument("--tokenize-prompt", action="store_true")
    if VERSION >= (0, 5, 12):
        p.add_argument("--ready-check-timeout-sec", type=int, default=60)
    if VERSION >= (0, 5, 23):
        p.add_argument("--goodput", nargs="+", default=None)
    return p


def _base(args: argparse.Namespace) -> str:
    if args.base_url:
        return str(args.base_url).rstrip("/")
    return f"http://{args.host}:{args.port or 30000}"


def _headers() -> dict[str, str]:
    h = {"content-type": "application/json"}
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        h["authorization"] = f"Bearer {key}"
    return h


def _get(url: str) -> Any:
    with urllib.request.urlopen(urllib.request.Request(url, headers=_headers()), timeout=30) as r:
        return json.loads(r.read() or b"null")


def _model_info_tokenizer(base: str) -> str | None:
    """``/model_info``'s tokenizer when ``--tokenizer`` is unset (0.5.15 on; sglang 0.5.23 benchmark/serving.py)."""
    if VERSION < (0, 5, 15):
        return None
    try:
        info = _get(f"{base}/model_info")
    except (urllib.error.URLError, OSError):
        return None
    found = info.get("tokenizer_path") or info.get("model_path") if isinstance(info, dict) else None
    return str(found) if found else None


def _lens(args: argparse.Namespace, rng: random.Random) -> list[tuple[int, int]]:
    def draw(n: int) -> int:
        return rng.randint(max(int(n * args.random_range_ratio), 1), n)

    return [(draw(args.random_input_len), draw(args.random_output_len)) for _ in range(args.num_prompts)]


def _one(args: argparse.Namespace, base: str, model: str, isl: int, osl: int, extra: dict[str, Any]) -> dict[str, Any]:
    prompt = " ".join(["hi"] * isl)
    ignore_eos = not args.disable_ignore_eos
    if args.backend in ("sglang-oai-chat",):
        url, body = (
            f"{base}/v1/chat/completions",
            {
                "model": model,
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": osl,
                "stream": True,
                "ignore_eos": ignore_eos,
            },
        )
    elif args.backend == "sglang-oai":
        url, body = (
            f"{base}/v1/completions",
            {"model": model, "prompt": prompt, "max_tokens": osl, "stream": True, "ignore_eos": ignore_eos},
        )
    else:
        url, body = (
            f"{base}/generate",
            {
                "text": prompt,
                "stream": True,
                "sampling_params": {"max_new_tokens": osl, "ignore_eos": ignore_eos, "temperature": 0.0},
            },
        )
    body.update(extra)
    start = time.perf_counter()
    out: dict[str, Any] = {
        "success": False,
        "ttft": 0.0,
        "itl": [],
        "latency": 0.0,
        "prompt_len": isl,
        "output_len": 0,
        "error": "",
        "text": "",
    }
    last = start
    try:
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=_headers(), method="POST")
        with urllib.request.urlopen(req, timeout=600) as r:
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                now = time.perf_counter()
                if out["output_len"] == 0:
                    out["ttft"] = now - start
                else:
                    out["itl"].append(now - last)
                last = now
                out["output_len"] += 1
        out["success"] = True
    except (urllib.error.URLError, OSError) as exc:
        out["error"] = str(exc)
    out["latency"] = time.perf_counter() - start
    return out


def _pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    k = (len(v) - 1) * p / 100
    f = int(k)
    c = min(f + 1, len(v) - 1)
    return v[f] + (v[c] - v[f]) * (k - f)


def _stats(values: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in values] or [0.0]
    return {
        "mean": statistics.fmean(ms),
        "median": statistics.median(ms),
        "std": statistics.pstdev(ms),
        "p90": _pct(ms, 90),
        "p95": _pct(ms, 95),
        "p99": _pct(ms, 99),
        "max": max(ms),
    }


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    config.set_ulimit()
    base = _base(args)
    deadline = time.monotonic() + getattr(args, "ready_check_timeout_sec", 60)
    while True:
        try:
            models = _get(f"{base}/v1/models")
            break
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                print(f"Server at {base} not ready after {getattr(args, 'ready_check_timeout_sec', 60)}s")
                return 1
            time.sleep(0.5)
    model = args.model or (models.get("data") or [{}])[0].get("id", "default")
    try:  # the tokenizer, as SGLang's client loads it before any request (sglang 0.5.23 benchmark/serving.py)
        tokenizer.resolve(args.tokenizer or _model_info_tokenizer(base) or model)
    except OSError as exc:
        sys.stderr.write(
            'Traceback (most recent call last):\n  File "<frozen runpy>", line 198, in _run_module_as_main\n'
            f"OSError: {exc}\n"
        )
        return 1
    if args.dataset_name in ("sharegpt", "random") and not os.path.isfile(args.dataset_path):
        sys.stderr.write(
            'Traceback (most recent call last):\n  File "<frozen runpy>", line 198, in _run_module_as_main\n'
            "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on "
            "the Hub and we cannot find the requested files in the local cache. Please check your connection and "
            "try again or make sure your Internet connection is on.\n"
        )
        return 1
    rng = random.Random(args.seed)
    lens = _lens(args, rng)
    extra = json.loads(args.extra_request_body) if args.extra_request_body else {}
    print(f"#Input tokens: {sum(i for i, _ in lens)}\n#Output tokens: {sum(o for _, o in lens)}")
    if args.warmup_requests and lens:
        print(f"Starting warmup with {args.warmup_requests} sequences...")
        for _ in range(args.warmup_requests):
            w = _one(args, base, model, lens[0][0], min(lens[0][1], 32), extra)
            if not w["success"]:
                raise ValueError(
                    f"Warmup failed - Please make sure benchmark arguments are correctly specified. Error: {w['error']}"
                )
        print("Warmup completed. Starting main benchmark run...")
    results: list[dict[str, Any]] = [{} for _ in lens]
    peak = [0, 0]
    lock = threading.Lock()
    todo = iter(enumerate(lens))

    # at most --max-concurrency requests in flight, as the real client's semaphore around each request task
    # (sglang 0.5.23 benchmark/serving.py); one thread per slot, not per request, so a 3,072-request level
    # does not need 3,072 threads
    def worker() -> None:
        while True:
            with lock:
                nxt = next(todo, None)
                if nxt is None:
                    return
                peak[0] += 1
                peak[1] = max(peak[1], peak[0])
            i, (isl, osl) = nxt
            try:
                results[i] = _one(args, base, model, isl, osl, extra)
            finally:
                with lock:
                    peak[0] -= 1

    start = time.perf_counter()
    slots = min(args.max_concurrency or len(lens), len(lens)) or 1
    threads = [threading.Thread(target=worker) for _ in range(slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    duration = time.perf_counter() - start
    ok = [r for r in results if r.get("success")]
    try:
        info = _get(f"{base}/server_info" if VERSION >= (0, 5, 12) else f"{base}/get_server_info")
    except (urllib.error.URLError, OSError):
        info = None
    report(args, ok, duration, peak[1], info)
    return 0


def report(
    args: argparse.Namespace, ok: list[dict[str, Any]], duration: float, peak: int, info: dict[str, Any] | None
) -> None:
    n_in = sum(r["prompt_len"] for r in ok)
    n_out = sum(r["output_len"] for r in ok)
    e2e, ttft = _stats([r["latency"] for r in ok]), _stats([r["ttft"] for r in ok])
    tpot = _stats([(r["latency"] - r["ttft"]) / (r["output_len"] - 1) for r in ok if r["output_len"] > 1])
    itl = _stats([x for r in ok for x in r["itl"]])
    concurrency = sum(r["latency"] for r in ok) / duration if duration else 0.0
    rr = "inf" if args.request_rate == float("inf") else args.request_rate
    lines = ["", "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    row = "{:<40} {:<10}".format
    rowf = "{:<40} {:<10.2f}".format
    lines += [
        row("Backend:", args.backend),
        row("Traffic request rate:", rr),
        row("Max request concurrency:", args.max_concurrency if args.max_concurrency else "not set"),
        row("Successful requests:", len(ok)),
        rowf("Benchmark duration (s):", duration),
        row("Total input tokens:", n_in),
    ]
    if NEW:
        lines += [row("Total input text tokens:", n_in)]
    lines += [
        row("Total generated tokens:", n_out),
        row("Total generated tokens (retokenized):", n_out),
        rowf("Request throughput (req/s):", len(ok) / duration),
        rowf("Input token throughput (tok/s):", n_in / duration),
        rowf("Output token throughput (tok/s):", n_out / duration),
        rowf("Peak output token throughput (tok/s):", n_out / duration * 1.2),
        row("Peak concurrent requests:", peak),
        rowf("Total token throughput (tok/s):", (n_in + n_out) / duration),
        rowf("Concurrency:", concurrency),
    ]
    sections: list[tuple[str, str, dict[str, float], tuple[str, ...]]] = [
        (
            "End-to-End Latency",
            "E2E Latency",
            e2e,
            ("mean", "median", "p90", "p95", "p99") if NEW else ("mean", "median", "p90", "p99"),
        ),
        (
            "Time to First Token",
            "TTFT",
            ttft,
            ("mean", "median", "p90", "p95", "p99") if NEW else ("mean", "median", "p99"),
        ),
        (
            "Time per Output Token (excl. 1st token)",
            "TPOT",
            tpot,
            ("mean", "median", "p90", "p95", "p99") if NEW else ("mean", "median", "p99"),
        ),
        (
            "Inter-Token Latency",
            "ITL",
            itl,
            ("mean", "median", "p90", "p95", "p99", "max") if NEW else ("mean", "median", "p95", "p99", "max"),
        ),
    ]
    for title, label, stats, keys in sections:
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        for k in keys:
            lines.append(
                rowf(f"{k.capitalize() if k in ('mean', 'median', 'max') else k.upper()} {label} (ms):", stats[k])
            )
    lines.append("=" * 50)
    print("\n".join(lines))
    out = args.output_file or (
        f"{args.backend}_{time.strftime('%m%d')}_{args.num_prompts}_"
        f"{args.random_input_len}_{args.random_output_len}.jsonl"
    )
    record: dict[str, Any] = {
        "tag": args.tag,
        "backend": args.backend,
        "dataset_name": args.dataset_name,
        "request_rate": rr,
        "max_concurrency": args.max_concurrency,
        "sharegpt_output_len": args.sharegpt_output_len,
        "random_input_len": args.random_input_len,
        "random_output_len": args.random_output_len,
        "random_range_ratio": args.random_range_ratio,
        "server_info": info,
        "duration": duration,
        "completed": len(ok),
        "total_input_tokens": n_in,
    }
    if NEW:
        record.update({"total_input_text_tokens": n_in, "total_input_vision_tokens": 0})
    record.update(
        {
            "total_output_tokens": n_out,
            "total_output_tokens_retokenized": n_out,
            "request_throughput": len(ok) / duration,
            "input_throughput": n_in / duration,
            "output_throughput": n_out / duration,
            "total_throughput": (n_in + n_out) / duration,
        }
    )
    metrics: dict[str, tuple[dict[str, float], tuple[str, ...]]] = {
        "e2e_latency": (
            e2e,
            ("mean", "median", "std", "p90", "p95", "p99") if NEW else ("mean", "median", "std", "p90", "p99"),
        ),
        "ttft": (ttft, ("mean", "median", "std", "p90", "p95", "p99") if NEW else ("mean", "median", "std", "p99")),
        "tpot": (tpot, ("mean", "median", "std", "p90", "p95", "p99") if NEW else ("mean", "median", "std", "p99")),
        "itl": (
            itl,
            ("mean", "median", "std", "p90", "p95", "p99") if NEW else ("mean", "median", "std", "p95", "p99"),
        ),
    }
    for metric, (stats, names) in metrics.items():
        for name in names:
            record[f"{name}_{metric}_ms"] = stats[name]
    record.update(
        {
            "concurrency": sum(r["latency"] for r in ok) / duration if duration else 0.0,
            "accept_length": None,
            "max_output_tokens_per_s": n_out / duration * 1.2,
            "max_concurrent_requests": peak,
        }
    )
    with open(out, "a") as fh:
        fh.write(json.dumps(record) + "\n")
