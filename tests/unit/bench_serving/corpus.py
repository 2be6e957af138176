"""Paths of the bench_serving corpus (``tests/fixtures/sglang/bench``, sources in its SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "bench"
SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "schema" / "bench-sglang.schema.json"

PRINTED = sorted(p.name for p in BENCH.glob("*.txt"))
JSONL = sorted(p.name for p in BENCH.glob("v*.jsonl"))


def fixture(name: str) -> Path:
    return BENCH / name


def text(name: str) -> str:
    return fixture(name).read_text(encoding="utf-8")
