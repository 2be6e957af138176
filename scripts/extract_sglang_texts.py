#!/usr/bin/env python3
"""Extract the log lines and error texts the lab's SGLang stand-in prints from a released SGLang wheel.

Usage::

    scripts/extract_sglang_texts.py VERSION --wheel PATH [--out FILE]

Nothing of SGLang runs: each text is found by parsing the named source file of the wheel (``ast``) and taking the
string expression (a literal, or an f-string with its implicit concatenations joined) that contains the needle.
An f-string becomes a list of parts, literal text or ``{"expr": SOURCE, "spec": FORMAT}``; the stand-in fills the
fields in order (``gpuhost.lab.sglang.standin._lab.texts``).

Output (JSON)::

    {"sglang_version": "0.5.23", "source": "<wheel> sha256:<hex>",
     "texts": {"KEY": {"file": "sglang/...py", "line": N, "parts": [...]}, ...}}
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

#: key -> (file in the wheel, needle the string contains), per version family (``new``: 0.5.15 on)
NEEDLES_NEW: dict[str, tuple[str, str]] = {
    "load_weight_begin": ("sglang/srt/model_executor/model_runner.py", "Load weight begin. avail mem="),
    "load_weight_end": ("sglang/srt/model_executor/model_runner.py", "Load weight end. "),
    "capture_begin": (
        "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py",
        "begin. backend={}, num_tokens_per_req=",
    ),
    "capture_end": ("sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py", "end. bs={}, elapsed="),
    "fired_up": ("sglang/srt/entrypoints/http_server.py", "The server is fired up and ready to roll!"),
    "scheduler_exception": ("sglang/srt/managers/scheduler.py", "Scheduler hit an exception: "),
    "sigquit": ("sglang/srt/entrypoints/engine.py", "Received sigquit from a child process."),
    "gracefully_exiting": ("sglang/srt/managers/tokenizer_manager.py", "Gracefully exiting... Remaining number"),
    "dsa_kv_dtype": ("sglang/srt/arg_groups/overrides.py", "for DeepSeek DSA on SM"),
    "allreduce_fusion_arch": ("sglang/srt/layers/flashinfer_comm_fusion.py", "allreduce fusion requires SM90"),
    "custom_allreduce_pcie": (
        "sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py",
        "more than two PCIe-only GPUs",
    ),
}
NEEDLES_OLD: dict[str, tuple[str, str]] = {
    "load_weight_begin": ("sglang/srt/model_executor/model_runner.py", "Load weight begin. avail mem="),
    "load_weight_end": ("sglang/srt/model_executor/model_runner.py", "Load weight end. "),
    "capture_begin": ("sglang/srt/model_executor/model_runner.py", "begin. This can take up to several minutes."),
    "capture_end": ("sglang/srt/model_executor/model_runner.py", "end. Time elapsed: {} s. "),
    "fired_up": ("sglang/srt/entrypoints/http_server.py", "The server is fired up and ready to roll!"),
    "scheduler_exception": ("sglang/srt/managers/scheduler.py", "Scheduler hit an exception: "),
    "sigquit": ("sglang/srt/entrypoints/engine.py", "Received sigquit from a child process."),
    "gracefully_exiting": ("sglang/srt/managers/tokenizer_manager.py", "Gracefully exiting... Remaining number"),
}


def _parts(node: ast.expr) -> list[Any] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out: list[Any] = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                spec = ""
                if v.format_spec is not None and isinstance(v.format_spec, ast.JoinedStr):
                    spec = "".join(str(c.value) for c in v.format_spec.values if isinstance(c, ast.Constant))
                expr = ast.unparse(v.value)
                out.append({"expr": expr, "spec": spec, "conversion": v.conversion})
        return out
    return None


def _text(parts: list[Any]) -> str:
    return "".join(p if isinstance(p, str) else "{}" for p in parts)


def find(source: str, needle: str) -> tuple[int, list[Any]]:
    """The first string expression of ``source`` whose literal text holds ``needle``: (line, parts)."""
    found: list[tuple[int, list[Any]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.JoinedStr, ast.Constant)):
            parts = _parts(node)
            if parts is not None and needle in _text(parts):
                found.append((node.lineno, parts))
    if not found:
        raise LookupError(needle)
    # an f-string's literal pieces are Constants too: keep the outermost (longest) expression at the first line
    found.sort(key=lambda f: (f[0], -len(_text(f[1]))))
    return found[0]


def _is_new(version: str) -> bool:
    return tuple(int(x) for x in version.split(".")[:3] if x.isdigit()) >= (0, 5, 15)


def extract(version: str, wheel: Path) -> dict[str, Any]:
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    texts: dict[str, Any] = {}
    with zipfile.ZipFile(wheel) as zf:
        for key, (path, needle) in (NEEDLES_NEW if _is_new(version) else NEEDLES_OLD).items():
            line, parts = find(zf.read(path).decode("utf-8"), needle)
            texts[key] = {"file": path, "line": line, "parts": parts}
    return {"sglang_version": version, "source": f"{wheel.name} sha256:{digest}", "texts": texts}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("version")
    ap.add_argument("--wheel", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    text = json.dumps(extract(args.version, args.wheel), indent=1, sort_keys=False) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
