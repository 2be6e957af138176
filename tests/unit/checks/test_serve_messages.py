"""The serve checks' failure messages, whole, and the subject they name: what an operator reads after
``gpuhost verify serve`` (probe observations as tools/serve_probe.py reports them)."""

from __future__ import annotations

from typing import Any

from gpuhost.checks.finding import Level
from gpuhost.checks.serve import answer_matches, check_canary, check_smoke, serve_findings


def ans(content: Any, expected: Any = "391", error: str | None = None, reasoning: Any = None) -> dict[str, Any]:
    return {
        "question": "What is 17*23?",
        "expected": expected,
        "content": content,
        "reasoning": reasoning,
        "error": error,
    }


def test_a_wrong_smoke_answer_shows_what_came_back() -> None:
    (f,) = check_smoke({"smoke": ans("It is 392.")}, "pve1/CT 200")
    assert (f.level, f.check, f.subject) == (Level.FAIL, "serve.smoke", "pve1/CT 200")
    assert f.message == "asked 'What is 17*23?', expected 391, got 'It is 392.'"
    assert (f.cause, f.fix) == ("the first real query failed or returned a wrong answer", "gpuhost serve logs")


def test_an_error_is_shown_cut_at_200_characters() -> None:
    (f,) = check_smoke({"smoke": ans(None, error="x" * 300)}, "s")
    assert f.message == "asked 'What is 17*23?', expected 391, got error: " + "x" * 200


def test_no_content_and_long_content() -> None:
    (f,) = check_smoke({"smoke": ans(None)}, "s")
    assert f.message.endswith("got no content")
    (g,) = check_smoke({"smoke": ans("y" * 150)}, "s")
    assert g.message.endswith("got " + repr("y" * 120))


def test_the_canary_names_the_first_wrong_answer() -> None:
    canary = [ans("391"), ans("Lyon", expected="Paris"), ans("7", expected="8")]
    (f,) = check_canary({"canary": canary}, "s")
    assert f.message == "canary 1/3 correct; e.g. 'What is 17*23?': expected Paris, got 'Lyon'"


def test_answer_matching() -> None:
    assert answer_matches(ans("The capital is paris.", expected="Paris"))  # case does not matter
    assert not answer_matches(ans("Parisian", expected="Paris"))  # a word, not a substring
    assert not answer_matches(ans("anything", expected=""))
    assert not answer_matches({"content": "391"})  # no expected answer: nothing can match
    assert not answer_matches(ans(None, reasoning=None))
    assert answer_matches(ans("", reasoning="so 391"))  # empty content: the reasoning counts
    assert not answer_matches(ans(["391"]))  # not text


def test_every_finding_names_the_subject() -> None:
    probe = {
        "health": 200,
        "smoke": ans("391"),
        "canary": [dict(ans("391"), logprobs={"count": 2, "nonfinite": 0, "min": -0.2, "max": -0.01})],
        "server_info": {"tp_size": 8},
        "perf": {"error": None, "tokens": 40, "ttft_s": 0.2, "tokens_per_s": 31.5},
    }
    fs = serve_findings(probe, "pve1/CT 200", {"tp_size": "8"})
    assert [f.check for f in fs] == [
        "serve.health",
        "serve.smoke",
        "serve.canary",
        "serve.logprobs",
        "serve.server-info",
        "serve.speed",
    ]
    assert {f.subject for f in fs} == {"pve1/CT 200"}
    assert [f.level for f in fs] == [Level.PASS] * 5 + [Level.INFO]
