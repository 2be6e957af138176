"""A suite's reads are made once per subject, and a read that failed fails every proof that needs it, once."""

from __future__ import annotations

import pytest

from gpuhost.acceptance.proof import ProofFailed, ProofSkipped, Prover, Subject
from gpuhost.checks.finding import Finding, Level


def test_a_read_is_made_once_per_subject_and_its_failure_repeats_without_reading_again() -> None:
    calls: list[str] = []

    def status(s: Subject) -> str:
        calls.append("status")
        return "stopped"

    def inside(s: Subject) -> str:
        calls.append("inside")
        if s.read(status) != "running":
            raise ProofFailed("ct.running pve1/CT 200: CT 200 is stopped")
        return "facts"

    subject = Subject(inventory=None, key=("pve1", 200))
    assert subject.read(status) == "stopped"
    for _ in range(3):
        with pytest.raises(ProofFailed, match="CT 200 is stopped"):
            subject.require((status, inside))
    assert calls == ["status", "inside"]
    other = Subject(inventory=None, key=("pve1", 201))  # another subject reads for itself
    other.read(status)
    assert calls == ["status", "inside", "status"]


def test_the_prover_records_the_finding_fails_with_its_cause_and_fix_and_skips_what_does_not_apply() -> None:
    props: list[tuple[str, object]] = []
    prove = Prover(props)

    def memlock(limit: str) -> Finding:
        return Finding(Level.FAIL, "ct.memlock", "pve1/CT 200", f"ulimit -l {limit}", "pinned memory", "set it")

    memlock.check_name = "ct.memlock"  # type: ignore[attr-defined]
    with pytest.raises(ProofFailed) as failed:
        prove(memlock, "65536")
    assert str(failed.value) == "ct.memlock pve1/CT 200: ulimit -l 65536\n  cause: pinned memory\n  fix:   set it"
    assert props[0] == ("check", "ct.memlock") and props[1][0] == "finding"
    with pytest.raises(ProofSkipped, match="^ct.memlock: not on this kernel$"):
        prove(_named(None), not_applicable="not on this kernel")


def _named(result: object):  # a check function that returns ``result``
    def check() -> object:
        return result

    check.check_name = "ct.memlock"  # type: ignore[attr-defined]
    return check
