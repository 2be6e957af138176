"""The stand-in prints the real SGLang's texts: filled from the extracted templates, checked against lines that
SGLang 0.5.23 prints (the shared reference sglang-2026-12 §4.2 quotes them; the templates name their source)."""

from __future__ import annotations

import json

import pytest

from gpuhost.lab.sglang import wheels
from gpuhost.lab.sglang.standin._lab import texts


@pytest.fixture
def v0523(monkeypatch: pytest.MonkeyPatch) -> None:
    table = json.loads(wheels.texts_file("0.5.23").read_text())["texts"]
    monkeypatch.setattr(texts, "_table", lambda: table)


def test_capture_lines_fill_as_sglang_0523_prints_them(v0523: None) -> None:
    begin = texts.fill("capture_begin", "target decode", "CUDA graph", "full", 1, 80.5)
    assert begin == "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=80.50 GB"
    end = texts.fill("capture_end", "target decode", "CUDA graph", [1, 2], 3.14159, 0.87, 79.63)
    assert (
        end == "Capture target decode CUDA graph end. bs=[1, 2], elapsed=3.14 s, mem usage=0.87 GB, avail mem=79.63 GB."
    )


def test_debug_fstring_fields_keep_their_repr(v0523: None) -> None:
    line = texts.fill("gracefully_exiting", 2, ["a"])
    assert line == "Gracefully exiting... Remaining number of requests 2. Remaining requests remaining_rids=['a']."


def test_a_wrong_number_of_fields_is_an_error(v0523: None) -> None:
    with pytest.raises(TypeError, match="capture_begin: 5 fields"):
        texts.fill("capture_begin", "target decode")


def test_every_text_names_the_wheel_file_and_line_it_came_from() -> None:
    for version in ("0.5.8.post1", "0.5.23"):
        doc = json.loads(wheels.texts_file(version).read_text())
        assert doc["sglang_version"] == version and "sha256:" in doc["source"]
        for key, t in doc["texts"].items():
            assert t["file"].startswith("sglang/") and t["line"] > 0, key
