"""Turn raw log text into message lines: split carriage returns, drop tqdm bars and log prefixes."""

from __future__ import annotations

import re

# "[2026-02-26 15:56:59] ERROR: ", "[2024-10-22 06:31:49 TP0] ", "[2026-... TP3 DP1 EP2] ", "[rank4]:[E1016 ...] "
_PREFIXES = [
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.@-]+(?:\[\d+\])?: "),  # journald short
    re.compile(r"^\s*\((?:[\w-]+ )?pid=\d+(?:, ip=[\d.]+)?\)\s?"),  # Ray / multiprocessing "(SGLangEngine pid=1)"
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z]+\d+)*\]\s?"),  # SGLang "[ts TP0 DP1]"
    re.compile(r"^\[rank\d+\]:"),
    re.compile(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)(?: \([\w.]+\))?:\s+"),  # uvicorn/logging level names
]
# a tqdm progress bar: "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01, ...]" or "45%|###  |"
_TQDM = re.compile(r"^[^\r\n]*?\d{1,3}%(?: Completed)? ?\|[^|]*\|[^\]\r\n]*\]")


def split_raw(text: str) -> list[str]:
    """Physical lines of ``text``; a carriage return also ends a line (tqdm redraws)."""
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(part for part in line.split("\r"))
    return out


def strip_tqdm(line: str) -> str:
    """``line`` without a leading progress bar glued onto it (empty if it was only a bar)."""
    m = _TQDM.match(line)
    return line[m.end() :] if m else line


def message(line: str) -> str:
    """The message of one physical line: prefixes removed, whitespace trimmed (indentation is not trusted)."""
    text = strip_tqdm(line.rstrip("\r\n"))
    for _ in range(3):  # prefixes stack: journald, then SGLang's, then a level name
        before = text
        for pat in _PREFIXES:
            text = pat.sub("", text, count=1)
        if text == before:
            break
    return text.strip()
