"""The real SGLang's log lines and error texts for this version (``texts.json`` in this package, extracted from
the release's wheel by ``scripts/extract_sglang_texts.py``): each names its source file and line there."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    with open(os.path.join(os.path.dirname(__file__), "texts.json")) as fh:
        texts: dict[str, Any] = json.load(fh)["texts"]
    return texts


def known(key: str) -> bool:
    return key in _table()


def fill(key: str, *values: Any) -> str:
    """The text ``key`` with its f-string fields filled in order by ``values`` (each formatted with the field's
    own conversion and format spec, as the f-string would)."""
    parts = _table()[key]["parts"]
    fields = [p for p in parts if not isinstance(p, str)]
    if len(values) != len(fields):
        raise TypeError(f"{key}: {len(fields)} fields ({', '.join(f['expr'] for f in fields)}), {len(values)} given")
    out: list[str] = []
    it = iter(values)
    for p in parts:
        if isinstance(p, str):
            out.append(p)
            continue
        v = next(it)
        conv = p.get("conversion", -1)
        if conv == ord("r"):
            v = repr(v)
        elif conv == ord("s"):
            v = str(v)
        out.append(format(v, p.get("spec", "")))
    return "".join(out)
