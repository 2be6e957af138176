"""SGLang's own argparse ``type=`` functions, as checks of a profile value: the flag table names the function
(its ``type``), this module says what it refuses. Each mirrors the function in the SGLang 0.5.23 wheel named
next to it; argparse turns their ``ArgumentTypeError`` into exit 2 before anything loads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

#: ``model_executor/cuda_graph_config.py:32-37`` (Phase.ALL) and ``:75-85`` (ALLOWED_KEYS_PER_PHASE)
CUDA_GRAPH_PHASE_KEYS = {
    "decode": ("backend", "max_bs", "bs"),
    "prefill": (
        "backend",
        "max_bs",
        "bs",
        "max_context_size",
        "full_prefill_max_req",
        "full_prefill_prefix_chunk_tokens",
        "max_seq_len",
    ),
}


def _cuda_graph_backend(text: str) -> str | None:
    """``parse_cuda_graph_backend_arg`` (``cuda_graph_config.py:237-243``): the retired backend is refused."""
    if text == "tc_piecewise":
        return "tc_piecewise was removed; select breakable, full, or disabled"
    return None


def _cuda_graph_config(text: str) -> str | None:
    """``parse_cuda_graph_config_arg`` (``cuda_graph_config.py:246-282``): a JSON object of phase -> settings."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        return f"--cuda-graph-config must be JSON: {exc}"
    if not isinstance(parsed, dict):
        return f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}"
    for phase, settings in parsed.items():
        if phase not in CUDA_GRAPH_PHASE_KEYS:
            return f"--cuda-graph-config: unknown phase '{phase}', expected one of {tuple(CUDA_GRAPH_PHASE_KEYS)}"
        if not isinstance(settings, dict):
            return f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}"
        if "backend" in settings and _cuda_graph_backend(str(settings["backend"])):
            return _cuda_graph_backend(str(settings["backend"]))
        for key in settings:
            if key not in CUDA_GRAPH_PHASE_KEYS[phase]:
                return (
                    f"--cuda-graph-config['{phase}']: unknown key '{key}', expected one of "
                    f"{CUDA_GRAPH_PHASE_KEYS[phase]}"
                )
    return None


def _json_list(text: str) -> str | None:
    """``json_list_type`` (``utils/common.py:4818-4824``): any JSON (orjson.loads)."""
    try:
        json.loads(text)
    except ValueError:
        return f"Invalid JSON list: {text}. Please provide a valid JSON list."
    return None


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")


def _human_readable_int(text: str) -> str | None:
    """``human_readable_int`` (``utils/common.py:3394-3425``): an int, or SI/IEC suffixed; no decimals with IEC."""
    value = text.strip()
    m = _HUMAN_INT.fullmatch(value)
    if m:
        if m.group(2).endswith("i") and "." in m.group(1):
            return f"Decimals are not allowed with IEC suffixes like '{m.group(2)}'"
        return None
    try:
        int(value)
    except ValueError:
        return f"invalid human_readable_int value: '{text}'"
    return None


#: the table's ``type`` name -> the check of one value (None: accepted)
CHECKS: dict[str, Callable[[str], str | None]] = {
    "parse_cuda_graph_config_arg": _cuda_graph_config,
    "parse_cuda_graph_backend_arg": _cuda_graph_backend,
    "json_list_type": _json_list,
    "human_readable_int": _human_readable_int,
}


def type_error(type_name: str | None, text: str) -> str | None:
    """What SGLang's ``type`` function ``type_name`` says of ``text`` (None: accepted or not a custom type)."""
    check = CHECKS.get(type_name or "")
    return check(text) if check else None
