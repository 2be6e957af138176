"""Ask a running SGLang server, from the machine it runs on, what a user would: stdlib only, prints one JSON object.

    python3 serve_probe.py URL MODE [--env-file PATH] [--model NAME] [--timeout S]

MODE ``health``: ``{"health": CODE|null, "error": ...}``.
MODE ``verify``: health, a smoke chat completion, the accuracy canary (temperature 0, logprobs) and one streamed
completion for time to first token and tokens/s. Observations only: gpuhost judges them (``gpuhost.checks.serve``).
MODE ``info``: ``/server_info`` with every key that names a secret replaced by ``"<redacted>"``.

The API key, if any, is read from the env file's ``SGLANG_API_KEY=`` line, never from the command line.
"""

from __future__ import annotations

import json
import math
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from gpuhost.tools.envfile import env_lines

SMOKE = ("What is 17*23? Answer with just the number.", "391")
CANARY = (
    ("What is the capital of France? Answer with one word.", "Paris"),
    ("What is the chemical symbol for gold? Answer with the symbol only.", "Au"),
    ("How many days are there in a week? Answer with just the number.", "7"),
    ("What is 12+30? Answer with just the number.", "42"),
)
PERF_PROMPT = "Write a short paragraph about the history of computing."
#: the /server_info fields (argparse destinations) that gpuhost compares with what the profile sets
#: (``gpuhost.roles.sglang.server_info_expectation``)
SERVER_INFO_DESTS = (
    "quantization",
    "kv_cache_dtype",
    "dsa_prefill_backend",
    "dsa_decode_backend",
    "moe_runner_backend",
    "fp4_gemm_runner_backend",  # the field behind --fp4-gemm-backend (0.5.23 arg_groups/fields/exec_.py:282-290)
    "attention_backend",
)
#: what ``verify`` keeps of /server_info: the resolved settings a profile pins (nothing secret)
SERVER_INFO_KEYS = ("version", "tp_size", *SERVER_INFO_DESTS, "served_model_name")
SECRET_KEYS = ("api_key", "admin_api_key", "hf_token", "token", "password", "secret")


def api_key(env_file: str | None) -> str | None:
    for key, value in env_lines(env_file):
        if key.strip() == "SGLANG_API_KEY":
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            return value or None
    return None


def request(url: str, path: str, body: Any = None, key: str | None = None, timeout: float = 30.0) -> tuple[int, bytes]:
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = "Bearer " + key
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def error_text(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return f"{type(exc).__name__}: {reason if reason is not None else exc}"


def health(url: str, timeout: float) -> dict[str, Any]:
    try:
        code, _ = request(url, "/health", timeout=timeout)
        return {"health": code, "error": None}
    except (TimeoutError, urllib.error.URLError, OSError) as exc:
        return {"health": None, "error": error_text(exc)}


def chat(url: str, key: str | None, model: str, question: str, timeout: float, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "temperature": 0,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": question}],
    }
    body.update(extra)
    out: dict[str, Any] = {
        "question": question,
        "status": None,
        "content": None,
        "reasoning": None,
        "logprobs": None,
        "error": None,
    }
    start = time.monotonic()
    try:
        code, raw = request(url, "/v1/chat/completions", body, key, timeout)
    except (TimeoutError, urllib.error.URLError, OSError) as exc:
        out["error"] = error_text(exc)
        return out
    out["status"] = code
    out["seconds"] = round(time.monotonic() - start, 4)
    try:
        data = json.loads(raw)
    except ValueError:
        out["error"] = f"not JSON: {raw[:200]!r}"
        return out
    if code != 200:
        out["error"] = str(data.get("message") or data.get("error") or data)[:300] if isinstance(data, dict) else ""
        return out
    choice = (data.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    out["content"] = msg.get("content")
    out["reasoning"] = msg.get("reasoning_content")
    out["finish_reason"] = choice.get("finish_reason")
    entries = ((choice.get("logprobs") or {}).get("content")) or []
    values = [e.get("logprob") for e in entries if isinstance(e, dict)]
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    out["logprobs"] = {
        "count": len(values),
        "nonfinite": len(values) - len(finite),
        "min": min(finite) if finite else None,
        "max": max(finite) if finite else None,
    }
    return out


def stream(url: str, key: str | None, model: str, timeout: float) -> dict[str, Any]:
    body = {
        "model": model,
        "temperature": 0,
        "max_tokens": 256,
        "stream": True,
        "messages": [{"role": "user", "content": PERF_PROMPT}],
    }
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = "Bearer " + key
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(), headers, method="POST")
    start = time.monotonic()
    first: float | None = None
    chunks = 0
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                try:
                    delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
                except ValueError:
                    continue
                if delta.get("content") or delta.get("reasoning_content"):
                    chunks += 1
                    if first is None:
                        first = time.monotonic()
    except (TimeoutError, urllib.error.URLError, OSError) as exc:
        return {"error": error_text(exc), "tokens": chunks}
    end = time.monotonic()
    if first is None:
        return {"error": "no token arrived", "tokens": 0}
    decode = end - first
    return {
        "error": None,
        "tokens": chunks,
        "ttft_s": round(first - start, 4),
        "tokens_per_s": round((chunks - 1) / decode, 2) if chunks > 1 and decode > 0 else None,
    }


def redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: ("<redacted>" if any(s in k.lower() for s in SECRET_KEYS) and v not in (None, "") else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: serve_probe.py URL health|verify|info [--env-file F] [--model M] [--timeout S]", file=sys.stderr)
        return 2
    url, mode = argv[0].rstrip("/"), argv[1]
    opts: dict[str, str | None] = {"--env-file": None, "--model": "default", "--timeout": "120"}
    rest = argv[2:]
    for i in range(0, len(rest) - 1, 2):
        if rest[i] in opts:
            opts[rest[i]] = rest[i + 1]
    key = api_key(opts["--env-file"])
    timeout = float(opts["--timeout"] or "120")
    model = opts["--model"] or "default"
    out: dict[str, Any] = {"url": url, "mode": mode}
    out.update(health(url, min(timeout, 30.0)))
    if mode == "verify" and out["health"] == 200:
        out["smoke"] = dict(chat(url, key, model, SMOKE[0], timeout), expected=SMOKE[1])
        out["canary"] = [
            dict(chat(url, key, model, q, timeout, logprobs=True, top_logprobs=1), expected=a) for q, a in CANARY
        ]
        out["perf"] = stream(url, key, model, timeout)
        info = None
        try:
            code, raw = request(url, "/server_info", key=key, timeout=timeout)
            info = json.loads(raw) if code == 200 else None
            out["server_info_status"] = code
        except (TimeoutError, urllib.error.URLError, OSError, ValueError) as exc:
            out["server_info_status"] = error_text(exc)
        out["server_info"] = {k: info.get(k) for k in SERVER_INFO_KEYS} if isinstance(info, dict) else None
    elif mode == "info" and out["health"] is not None:
        try:
            code, raw = request(url, "/server_info", key=key, timeout=timeout)
            out["server_info"] = redact(json.loads(raw)) if code == 200 else None
            out["server_info_status"] = code
        except (TimeoutError, urllib.error.URLError, OSError, ValueError) as exc:
            out["error"] = error_text(exc)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
