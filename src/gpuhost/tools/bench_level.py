"""Run one level of SGLang's serving benchmark on the machine the server runs on; print one JSON object.

    python3 bench_level.py --python VENV/bin/python --module sglang.benchmark.serving [--env-file PATH] -- ARGS...

It runs ``PYTHON -m MODULE ARGS --output-file level.jsonl`` in the current directory with stdout and stderr
together, and prints ``{"t0": ..., "t1": ..., "rc": ..., "output": ..., "jsonl": ...}``: the wall clock
(``time.time()``) just before the client started and just after it ended, its exit status, what it printed and
the JSONL it wrote. The API key, if any, is read from the env file's ``SGLANG_API_KEY=`` line and handed to the
client as ``OPENAI_API_KEY`` (how SGLang's client sends it), never on a command line. ``HF_HUB_OFFLINE=1``: the
dataset and tokenizer must be local. Stdlib only.
"""

import argparse
import json
import os
import subprocess
import sys
import time


def api_key(env_file):
    if not env_file:
        return None
    try:
        with open(env_file) as fh:
            for line in fh:
                key, sep, value = line.strip().partition("=")
                if sep and key.strip() == "SGLANG_API_KEY":
                    value = value.strip()
                    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                        value = value[1:-1]
                    return value or None
    except OSError:
        return None
    return None


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--env-file", default=None)
    ap.add_argument("--timeout", type=float, default=0.0)
    ap.add_argument("client", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    client = args.client[1:] if args.client[:1] == ["--"] else args.client
    out_file = os.path.abspath("level.jsonl")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    key = api_key(args.env_file)
    if key:
        env["OPENAI_API_KEY"] = key
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
