"""A converged launch proves a server cheaply: the full proof (smoke, canary, logprobs, speed) once per start of
the server and configuration, recorded; on that same start ``/health`` and ``/server_info`` only, unless --prove.

The probe answers are what ``tools/serve_probe.py`` prints for the lab's stand-in (a human reading of its modes);
the start is the unit's ``MainPID@ExecMainStartTimestampMonotonic``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuhost.core.actions import WriteFile
from gpuhost.errors import OperationFailed
from gpuhost.facts import serve_layout
from gpuhost.facts.serve import ProofState, ServiceState
from gpuhost.operations.sglang import ReadyArgs, SglangReady, SglangVerify, VerifyServeArgs
from tests.unit.checks.test_serve import answer

CONFIG = "c" * 64
START = "4242@981234567"
URL = "http://10.0.0.5:30000"
EXPECT = {"version": "0.5.23", "tp_size": "2"}
INFO = {"health": 200, "server_info": {"version": "0.5.23", "tp_size": 2}, "server_info_status": 200}
FULL = {  # a verify-mode probe of a correct server, as tests/unit/checks/test_serve.py builds it
    **INFO,
    "smoke": answer("391", "391"),
    "canary": [answer("Paris", "Paris"), answer("The symbol is Au.", "Au"), answer("7", "7"), answer("42", "42")],
    "perf": {"error": None, "tokens": 40, "ttft_s": 0.2, "tokens_per_s": 31.5},
}


class Host:
    """Facts from fixed answers; each probe asked is recorded with its mode."""

    name, check = "pve1/ct230", False

    def __init__(self, proof: ProofState, probes: dict[str, dict[str, Any]]) -> None:
        self.proof, self.probes = proof, probes
        self.asked: list[str] = []

    def fact(self, fact: Any, *args: Any) -> Any:
        if fact.name == "sglang service":
            return ServiceState("active", "t" * 32, {"config_sha256": CONFIG})
        if fact.name == "sglang proof record":
            return self.proof
        if fact.name == "sglang probe":
            self.asked.append(args[1])
            return self.probes[args[1]]
        if fact.name == "sglang start-up":
            self.asked.append("watch")
            raise LookupError("the journal is not read on a proven start")
        raise KeyError(fact.name)


def verify(**kw: Any) -> SglangVerify:
    args = {"url": URL, "model": "glm-5", "expect": EXPECT, "config_sha256": CONFIG, "subject": "CT 230 sglang"}
    return SglangVerify(VerifyServeArgs.model_validate({**args, **kw}))


def proven() -> ProofState:
    return ProofState(START, {"start": START, "config_sha256": CONFIG})


def test_a_start_proven_before_gets_only_health_and_server_info() -> None:
    host = Host(proven(), {"info": INFO})
    plan = verify().plan(host)  # type: ignore[arg-type]
    assert host.asked == ["info"]
    assert not plan.changes
    assert "/health 200" in plan.reason and "passed on this start already (--prove asks again)" in plan.reason


def test_prove_asks_the_full_proof_again() -> None:
    host = Host(proven(), {"verify": FULL})
    plan = verify(prove=True).plan(host)  # type: ignore[arg-type]
    assert host.asked == ["verify"] and not plan.changes
    assert "canary 4/4 correct" in plan.reason


def test_a_new_start_gets_the_full_proof_and_its_record() -> None:
    host = Host(ProofState("5151@999000111", {"start": START, "config_sha256": CONFIG}), {"verify": FULL})
    plan = verify().plan(host)  # type: ignore[arg-type]
    assert host.asked == ["verify"]
    (write,) = plan.actions
    assert isinstance(write, WriteFile) and write.path == serve_layout.PROVED_FILE
    assert json.loads(write.content) == {"start": "5151@999000111", "config_sha256": CONFIG}
    assert plan.reason.endswith("; proof recorded")


def test_a_changed_configuration_is_not_the_proven_one() -> None:
    host = Host(ProofState(START, {"start": START, "config_sha256": "d" * 64}), {"verify": FULL})
    verify().plan(host)  # type: ignore[arg-type]
    assert host.asked == ["verify"]


def test_a_proven_start_that_answers_wrong_server_info_fails() -> None:
    wrong = {**INFO, "server_info": {"version": "0.5.23", "tp_size": 1}}
    with pytest.raises(OperationFailed, match="tp_size=1"):
        verify().plan(Host(proven(), {"info": wrong}))  # type: ignore[arg-type]


def test_a_failed_full_proof_records_nothing() -> None:
    garbage = {**FULL, "smoke": answer("banana", "391")}
    with pytest.raises(OperationFailed, match="expected 391"):
        verify().plan(Host(ProofState("5151@999000111", {}), {"verify": garbage}))  # type: ignore[arg-type]


def test_readiness_of_a_proven_start_reads_no_journal() -> None:
    ready = SglangReady(ReadyArgs(url=URL, config_sha256=CONFIG, subject="CT 230 sglang"))
    host = Host(proven(), {})
    plan = ready.plan(host)  # type: ignore[arg-type]
    assert host.asked == [] and not plan.actions
    assert plan.reason == "ready (up already, this start proven before)"
