"""Ask a running SGLang Model Gateway (``smg``), from the machine it runs on: stdlib only, prints one JSON object.

    python3 gateway_probe.py URL MODE [--env-file PATH] [--want URL ...] [--model NAME] [--requests N]

MODE ``state``: ``{"health": CODE|null, "workers": [{"url", "id", "healthy", "status"}], "error": ...}``.
MODE ``sync``: the gateway's workers made exactly ``--want`` through its worker API (``POST /workers``, ``DELETE
/workers/ID``), no restart; then ``state``, plus ``added`` and ``removed``.
MODE ``spread``: ``--requests`` chat completions through the gateway, each replica's ``sglang:num_requests_total``
read from its own ``/metrics`` before and after: ``{"statuses": [...], "served": {URL: N|null}, "answers": [...]}``.

The API key (the gateway's and the replicas') is read from the env file's ``SMG_API_KEY=`` line, never from the
command line.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request
from typing import Any

from gpuhost.tools.envfile import env_lines


def api_key(env_file: str | None) -> str | None:
    for key, value in env_lines(env_file):
        if key == "SMG_API_KEY":
            return value
    return None


def call(
    url: str, key: str | None, method: str = "GET", body: Any = None, timeout: float = 30.0
) -> tuple[int | None, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (OSError, ValueError) as exc:
        return None, str(exc)


def state(base: str, key: str | None) -> dict[str, Any]:
    code, _ = call(f"{base}/health", key, timeout=5.0)
    out: dict[str, Any] = {"health": code, "workers": None, "error": None}
    wcode, text = call(f"{base}/workers", key, timeout=10.0)
    if wcode != 200:
        out["error"] = f"/workers: {wcode or text}"
        return out
    try:
        workers = json.loads(text).get("workers", [])
    except ValueError:
        out["error"] = "/workers: not JSON"
        return out
    out["workers"] = [
        {"url": w.get("url"), "id": w.get("id"), "healthy": bool(w.get("is_healthy")), "status": w.get("status")}
        for w in workers
    ]
    return out


def sync(base: str, key: str | None, want: list[str]) -> dict[str, Any]:
    now = state(base, key)
    if now["workers"] is None:
        return now
    have = {w["url"]: w["id"] for w in now["workers"]}
    added: list[str] = []
    removed: list[str] = []
    errors: list[str] = []
    for url in want:
        if url not in have:
            code, text = call(f"{base}/workers", key, "POST", {"url": url})
            if code in (200, 201, 202):
                added.append(url)
            elif code != 409:  # 409: registered meanwhile (a worker given at start registers in the background)
                errors.append(f"add {url}: {code} {text[:200]}")
    for url, wid in have.items():
        if url not in want:
            code, text = call(f"{base}/workers/{wid}", key, "DELETE")
            if code in (200, 202, 204):
                removed.append(url)
            else:
                errors.append(f"remove {url}: {code} {text[:200]}")
    out = state(base, key)
    out.update(added=added, removed=removed, error="; ".join(errors) or out["error"])
    return out


_REQS = re.compile(r"^sglang:num_requests_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.M)


def served(url: str, key: str | None) -> float | None:
    code, text = call(f"{url}/metrics", key, timeout=10.0)
    if code != 200:
        return None
    found = _REQS.findall(text)
    return sum(float(v) for v in found) if found else None


def spread(base: str, key: str | None, model: str, n: int, replicas: list[str]) -> dict[str, Any]:
    before = {r: served(r, key) for r in replicas}
    statuses: list[int | None] = []
    answers: list[Any] = []
    for i in range(n):
        body = {
            "model": model,
            "messages": [{"role": "user", "content": f"What is {i}+1? Answer with just the number."}],
            "max_tokens": 8,
            "temperature": 0,
        }
        code, text = call(f"{base}/v1/chat/completions", key, "POST", body, timeout=120.0)
        statuses.append(code)
        try:
            answers.append(json.loads(text)["choices"][0]["message"]["content"])
        except (ValueError, KeyError, IndexError, TypeError):
            answers.append(None)
    after = {r: served(r, key) for r in replicas}
    out: dict[str, int | None] = {}
    for r in replicas:
        b, a = before[r], after[r]
        out[r] = None if a is None or b is None else int(a - b)
    return {"statuses": statuses, "served": out, "answers": answers, "error": None}


def main(argv: list[str]) -> int:
    args = list(argv)
    if len(args) < 2:
        print(json.dumps({"error": "usage: gateway_probe.py URL MODE [options]"}))
        return 2
    base, mode, rest = args[0].rstrip("/"), args[1], args[2:]
    opts: dict[str, str | None] = {"--env-file": None, "--model": "default", "--requests": "0"}
    want: list[str] = []
    replicas: list[str] = []
    i = 0
    while i < len(rest):
        flag = rest[i]
        if flag in ("--want", "--replica"):
            (want if flag == "--want" else replicas).append(rest[i + 1].rstrip("/"))
        elif flag in opts:
            opts[flag] = rest[i + 1]
        else:
            print(json.dumps({"error": f"unknown option {flag}"}))
            return 2
        i += 2
    key = api_key(opts["--env-file"])
    if mode == "state":
        out = state(base, key)
    elif mode == "sync":
        out = sync(base, key, want)
    elif mode == "spread":
        out = spread(base, key, opts["--model"] or "default", int(opts["--requests"] or "0"), replicas)
    else:
        out = {"error": f"unknown mode {mode}"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
