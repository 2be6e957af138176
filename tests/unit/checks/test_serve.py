"""The serve checks judge what the probe on the target observed (the probe's own JSON, see tools/serve_probe.py)."""

from __future__ import annotations

import math
from typing import Any

from gpuhost.checks.finding import Level
from gpuhost.checks.serve import answer_matches, check_runtime, serve_findings
from gpuhost.core.result import CommandResult
from gpuhost.facts.serve import RuntimeFacts, parse_runtime


def answer(content: str | None, expected: str, reasoning: str | None = None, lp: list[float] | None = None) -> dict:
    values = lp if lp is not None else [-0.01, -0.2]
    finite = [v for v in values if math.isfinite(v)]
    return {
        "question": "q",
        "expected": expected,
        "content": content,
        "reasoning": reasoning,
        "error": None,
        "logprobs": {
            "count": len(values),
            "nonfinite": len(values) - len(finite),
            "min": min(finite) if finite else None,
            "max": max(finite) if finite else None,
        },
    }


def probe(canary: list[dict[str, Any]], smoke: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "health": 200,
        "smoke": smoke or answer("391", "391"),
        "canary": canary,
        "perf": {"error": None, "tokens": 40, "ttft_s": 0.2, "tokens_per_s": 31.5},
    }


def levels(findings: list[Any]) -> dict[str, Level]:
    return {f.check: f.level for f in findings}


def test_a_correct_server_passes_and_speed_is_info():
    out = serve_findings(probe([answer("Paris", "Paris"), answer("The symbol is Au.", "Au")]), "ct")
    assert levels(out) == {
        "serve.health": Level.PASS,
        "serve.smoke": Level.PASS,
        "serve.canary": Level.PASS,
        "serve.logprobs": Level.PASS,
        "serve.speed": Level.INFO,
    }


def test_garbage_fails_the_canary_and_nan_fails_logprobs():
    out = serve_findings(probe([answer("!!!!!!!!", "Paris"), answer("Au", "Au", lp=[-0.1, math.nan])]), "ct")
    lv = levels(out)
    assert lv["serve.canary"] == Level.FAIL and lv["serve.logprobs"] == Level.FAIL
    assert "canary 1/2 correct" in next(f.message for f in out if f.check == "serve.canary")


def test_answers_are_words_not_substrings_and_reasoning_counts_only_without_content():
    assert answer_matches(answer("17 * 23 = 391", "391"))
    assert not answer_matches(answer("3910", "391"))
    assert answer_matches(answer(None, "7", reasoning="A week has 7 days."))
    assert not answer_matches(answer("eight", "7", reasoning="7"))


def test_a_server_that_is_down_is_one_finding():
    out = serve_findings({"health": None, "error": "URLError: [Errno 111] Connection refused"}, "ct")
    assert [(f.check, f.level) for f in out] == [("serve.health", Level.FAIL)]
    assert "Connection refused" in out[0].message


def test_runtime_floor_python_311_glibc_234():
    ok = parse_runtime(CommandResult("x", 0, "python 3 11 2\nlibc glibc 2.36\n", ""))
    assert ok == RuntimeFacts((3, 11, 2), "glibc", (2, 36))
    assert all(f.level == Level.PASS for f in check_runtime(ok, "ct"))
    old = parse_runtime(CommandResult("x", 0, "python 3 10 12\nlibc glibc 2.31\n", ""))
    assert [f.level for f in check_runtime(old, "ct")] == [Level.FAIL, Level.FAIL]
    none = parse_runtime(CommandResult("x", 127, "", "sh: python3: not found"))
    assert check_runtime(none, "ct")[0].message == "python3 is not installed"


def test_server_info_must_show_what_the_profile_pins():
    expect = {"version": "0.5.23", "tp_size": "8", "dsa_decode_backend": "flashinfer_sparse_mla"}
    good = dict(
        probe([answer("Paris", "Paris")]),
        server_info={"version": "0.5.23", "tp_size": 8, "dsa_decode_backend": "flashinfer_sparse_mla"},
    )
    assert levels(serve_findings(good, "ct", expect))["serve.server-info"] == Level.PASS
    bad = dict(good, server_info={"version": "0.5.23", "tp_size": 8, "dsa_decode_backend": "trtllm"})
    out = [f for f in serve_findings(bad, "ct", expect) if f.check == "serve.server-info"]
    assert out[0].level == Level.FAIL and "dsa_decode_backend=trtllm (profile: flashinfer_sparse_mla)" in out[0].message
    # the trap: a server that died during the checks printed a non-failing /server_info line
    unread = dict(good, server_info=None, server_info_status="URLError: [Errno 111] Connection refused")
    out = [f for f in serve_findings(unread, "ct", expect) if f.check == "serve.server-info"]
    assert out[0].level == Level.FAIL
    assert out[0].message == (
        "/server_info could not be read (URLError: [Errno 111] Connection refused): the profile's settings are not "
        "verified"
    )
    refused = dict(good, server_info=None, server_info_status=401)
    out = [f for f in serve_findings(refused, "ct", expect) if f.check == "serve.server-info"]
    assert out[0].level == Level.FAIL and "(HTTP 401)" in out[0].message
    # a server_info with none of the pinned keys verifies nothing: not a pass
    empty = dict(good, server_info={"version": None})
    out = [f for f in serve_findings(empty, "ct", expect) if f.check == "serve.server-info"]
    assert out[0].level == Level.WARN and "nothing verified" in out[0].message
