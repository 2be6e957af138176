"""What a benchmark level leaves in the run directory, without the server's secrets.

SGLang's benchmark client embeds ``GET /server_info`` in every JSONL line (sglang 0.5.23
``benchmark/serving.py:1847-1867``); that object carries the server's ``api_key`` (and ``admin_api_key``) and
``launch_command``, the argv with ``--api-key KEY`` (``server_args.py:303-305``). The secrets found there are
masked in the line, registered with :mod:`gpuhost.redact` (so no later message shows them) and masked wherever
else the level's text repeats them (the client's log).
"""

from __future__ import annotations

import json
from typing import Any

from gpuhost.bench_serving.parse import SECRET_FLAG_RE, SECRET_KEY_RE, loads, redact_server_info
from gpuhost.redact import MASK, redact, register_secret


def secrets_in(value: Any) -> set[str]:
    """Every secret value ``server_info`` (or any JSON value) holds: values of keys that name a key/token/secret,
    and the argument of a secret flag inside a string."""
    found: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if SECRET_KEY_RE.search(str(k)) and isinstance(v, str) and v:
                found.add(v)
            found |= secrets_in(v)
    elif isinstance(value, list):
        for v in value:
            found |= secrets_in(v)
    elif isinstance(value, str):
        found |= {m.group(2).strip("'\"") for m in SECRET_FLAG_RE.finditer(value)}
    return {s for s in found if s and s != MASK}


def _mask(text: str, secrets: set[str]) -> str:
    for s in sorted(secrets, key=len, reverse=True):
        text = text.replace(s, MASK)
    return redact(text)


def scrub_level(jsonl: str | None, log: str) -> tuple[str | None, str]:
    """``(jsonl, log)`` of one level with every secret the server echoed masked."""
    secrets: set[str] = set()
    lines: list[str] = []
    for line in (jsonl or "").splitlines():
        try:
            obj = loads(line) if line.strip().startswith("{") else None
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            secrets |= secrets_in(obj)
            lines.append(json.dumps(redact_server_info(obj)))
        else:
            lines.append(line)
            secrets |= {m.group(2) for m in SECRET_FLAG_RE.finditer(line)}
    for s in secrets:
        register_secret(s)
    out = None if jsonl is None else _mask("\n".join(lines) + ("\n" if jsonl.endswith("\n") else ""), secrets)
    return out, _mask(SECRET_FLAG_RE.sub(lambda m: m.group(1) + MASK, log), secrets)
