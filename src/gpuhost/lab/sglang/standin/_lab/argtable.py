"""An argparse parser rebuilt from the version's real flag table (``flags.json`` in this package)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from .version import __version__

SUPPRESS_MARK = "==SUPPRESS=="


def load_table() -> dict[str, Any]:
    with open(os.path.join(os.path.dirname(__file__), "flags.json")) as fh:
        table: dict[str, Any] = json.load(fh)
    return table


def _named(name: str, fn: Callable[[str], Any]) -> Callable[[str], Any]:
    fn.__name__ = name  # argparse names the type in "invalid <name> value: 'x'"
    return fn


def _human_int(text: str) -> int:
    units = {"k": 10**3, "m": 10**6, "g": 10**9}
    t = text.strip().lower()
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


def _type(name: str | None) -> Callable[[str], Any] | None:
    if name in (None, "str"):
        return None
    if name == "int":
        return int
    if name == "float":
        return float
    if name == "human_readable_int":
        return _named(name, _human_int)
    if name in ("loads", "json_list_type"):
        return _named(name, lambda text: json.loads(text))
    return _named(name, lambda text: text)


def prog() -> str | None:
    """0.5.23 names its parser ``sglang serve``; older releases leave argparse's default."""
    parts = [int(p) for p in __version__.split(".")[:3] if p.isdigit()]
    return "sglang serve" if parts >= [0, 5, 21] else None


def build_parser(table: dict[str, Any] | None = None) -> argparse.ArgumentParser:
    table = table or load_table()
    parser = argparse.ArgumentParser(prog=prog())
    for arg in table["args"]:
        action = arg["action"]
        if action == "help":
            continue
        flags = list(arg["flags"])
        default = argparse.SUPPRESS if arg.get("default") == SUPPRESS_MARK else arg.get("default")
        kw: dict[str, Any] = {"dest": arg["dest"], "default": default}
        if arg.get("help"):
            kw["help"] = arg["help"].replace("%", "%%")
        if action in ("BooleanOptionalAction", "boolean_optional"):
            flags = [f for f in flags if not f.startswith("--no-")]
            parser.add_argument(*flags, action=argparse.BooleanOptionalAction, **kw)
            continue
        if action == "store_false":
            parser.add_argument(*flags, action="store_false", **kw)
            continue
        if action in ("store_true", "DeprecatedStoreTrueAction") or arg.get("nargs") == 0:
            parser.add_argument(*flags, action="store_const", const=True, **kw)
            continue
        type_fn = _type(arg.get("type"))
        if type_fn is not None:
            kw["type"] = type_fn
        if arg.get("choices") is not None:
            kw["choices"] = arg["choices"]
        if arg.get("nargs") is not None:
            kw["nargs"] = arg["nargs"]
        parser.add_argument(*flags, action="append" if action == "append" else "store", **kw)
    return parser


#: ``ServerArgs.from_cli_args`` of releases whose parallel-size flags have long destinations copies them onto the
#: short fields (sglang 0.5.8.post1 ``srt/server_args.py:4744-4748``)
_LONG_DESTS = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
}


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse like SGLang: argparse's own errors (exit 2) for unknown, ambiguous or invalid flags."""
    args = build_parser().parse_args(argv)
    for long, short in _LONG_DESTS.items():
        if hasattr(args, long) and not hasattr(args, short):
            setattr(args, short, getattr(args, long))
    return args
