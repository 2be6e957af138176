"""Run one level of SGLang's serving benchmark on the machine the server runs on; print one JSON object.

    python3 bench_level.py --python VENV/bin/python --module sglang.benchmark.serving [--env-file PATH] -- ARGS...

It runs ``PYTHON -m MODULE ARGS --output-file level.jsonl`` in the current directory with stdout and stderr
together, and prints ``{"t0": ..., "t1": ..., "rc": ..., "output": ..., "jsonl": ...}``: the wall clock
(``time.time()``) just before the client started and just after it ended, its exit status, what it printed and
the JSONL it wrote. The API key, if any, is read from the env file's ``SGLANG_API_KEY=`` line and handed to the
client as ``OPENAI_API_KEY`` (how SGLang's client sends it), never on a command line. ``HF_HUB_OFFLINE=1``: the
dataset and tokenizer must be local; the server's ``HF_HUB_CACHE`` (the env file's line, set when the model was
downloaded to a cache of the operator's choosing) is the client's too: SGLang's client loads the tokenizer with
``AutoTokenizer.from_pretrained`` (sglang 0.5.23 ``benchmark/utils.py:44-62``), which looks only in the default
cache unless ``HF_HUB_CACHE`` says otherwise. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def env_values(env_file: str | None) -> dict[str, str]:
    """``{NAME: value}`` of the env file's ``NAME=value`` lines (quotes around a value removed)."""
    out: dict[str, str] = {}
    if not env_file:
        return out
    try:
        with open(env_file) as fh:
            for line in fh:
                key, sep, value = line.strip().partition("=")
                if sep and key.strip() and not key.lstrip().startswith("#"):
                    value = value.strip()
                    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                        value = value[1:-1]
                    out[key.strip()] = value
    except OSError:
        return {}
    return out


def api_key(env_file: str | None) -> str | None:
    return env_values(env_file).get("SGLANG_API_KEY") or None


def client_env(base: dict[str, str], env_file: str | None) -> dict[str, str]:
    """The client's environment: ``base``, offline, the server's HF cache and its API key as ``OPENAI_API_KEY``."""
    values = env_values(env_file)
    env = dict(base, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    if values.get("HF_HUB_CACHE"):
        env["HF_HUB_CACHE"] = values["HF_HUB_CACHE"]
    if values.get("SGLANG_API_KEY"):
        env["OPENAI_API_KEY"] = values["SGLANG_API_KEY"]
    return env


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--env-file", default=None)
    ap.add_argument("--timeout", type=float, default=0.0)
    ap.add_argument("client", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    client = args.client[1:] if args.client[:1] == ["--"] else args.client
    out_file = os.path.abspath("level.jsonl")
    env = client_env(dict(os.environ), args.env_file)
    cmd = [args.python, "-m", args.module, *client, "--output-file", out_file]
    t0 = time.time()
    try:
        proc = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            timeout=args.timeout or None,
            check=False,
        )
        rc, output = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as exc:
        rc, output = 124, (exc.stdout or b"") + f"\nbench_level: timed out after {args.timeout:g} s\n".encode()
    except OSError as exc:
        rc, output = 127, f"bench_level: cannot run {args.python}: {exc}\n".encode()
    t1 = time.time()
    try:
        with open(out_file, encoding="utf-8", errors="replace") as fh:
            jsonl = fh.read()
    except OSError:
        jsonl = None
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else str(output)
    print(json.dumps({"t0": t0, "t1": t1, "rc": rc, "output": text, "jsonl": jsonl}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
