"""The acceptance suite without pytest: ``gpuhost verify host|lxc|vm|serve`` as an operator runs it every day.

The same proofs (:mod:`gpuhost.acceptance.proofs`), the same reads made once per subject, the same rows as a run
under pytest (:mod:`gpuhost.acceptance.pytest_run`, for ``--junit-xml`` or ``-v``), without pytest's start-up:
importing it, collecting the suite and setting up its fixtures were about a quarter second of every ``verify``.
"""

from __future__ import annotations

from typing import Any

from gpuhost.acceptance.proof import Proof, ProofFailed, ProofSkipped, Prover, Subject, Suite
from gpuhost.acceptance.report import Row, SuiteReport, SuiteRequest, make_row
from gpuhost.acceptance.selection import NONE_SELECTED, Selection, ids, select


def run_plain(request: SuiteRequest) -> SuiteReport:
    from gpuhost.acceptance import connections
    from gpuhost.acceptance.proofs import suite
    from gpuhost.inventory.loader import load_inventory

    inv = load_inventory(request.inventory)
    connections.use_inventory(inv)
    connections.take_round_trips()  # count this suite's commands only
    sel = select(inv, request.limit, list(request.ctids), list(request.vmids))
    proofs = suite(request.kind)
    rows: list[Row] = []
    changed: list[Any] | None = None
    try:
        keys = getattr(sel, proofs.field)
        for key, param in zip(keys, ids(sel, proofs.field), strict=True):
            subject = Subject(inv, key)
            rows += [_prove(proofs, p, subject, param) for p in proofs.proofs]
        if not keys:  # as pytest's run: each test once, skipped with why
            rows += [_row(proofs, p, "none", "SKIP", [], NONE_SELECTED[proofs.field]) for p in proofs.proofs]
    finally:
        changed = finish(sel, drift=request.drift, save_snapshot=False)
    return SuiteReport(request.kind, rows, 0, "", changed, connections.take_round_trips())


def _row(suite: Suite, proof: Proof, param: str, outcome: str, props: list[tuple[str, Any]], text: str) -> Row:
    """The row pytest's run gives: ``test_lxc.py::test_container[pve1/200-ct.memlock]``."""
    test = f"{suite.module}::test_{proof.name}[{param}{'-' + proof.param if proof.param else ''}]"
    return make_row(test, outcome, props, text)


def _prove(suite: Suite, proof: Proof, subject: Subject, param: str) -> Row:
    props: list[tuple[str, Any]] = []
    try:  # the reads it needs: their failure is the test's error (as a fixture's in setup)
        subject.require(proof.needs)
    except ProofFailed as exc:
        return _row(suite, proof, param, "ERROR", props, str(exc))
    except ProofSkipped as exc:
        return _row(suite, proof, param, "SKIP", props, str(exc))
    except Exception as exc:  # a defect: one error row naming it, as pytest would, and the next proof runs
        return _row(suite, proof, param, "ERROR", props, f"{type(exc).__name__}: {exc}")
    try:
        proof.run(subject, Prover(props))
    except ProofFailed as exc:
        return _row(suite, proof, param, "FAIL", props, str(exc))
    except ProofSkipped as exc:
        return _row(suite, proof, param, "SKIP", props, str(exc))
    except Exception as exc:
        return _row(suite, proof, param, "FAIL", props, f"{type(exc).__name__}: {exc}")
    return _row(suite, proof, param, "PASS", props, "")


def finish(sel: Selection, *, drift: bool, save_snapshot: bool) -> list[Any] | None:
    """After the proofs (either runner): what drifted since the last provision (``drift``), the state recorded
    as the new baseline (``save_snapshot``), and the suite's connections closed."""
    from gpuhost.acceptance import connections
    from gpuhost.acceptance import drift as drifts

    try:
        changed = drifts.check_all(connections.inventory(), sel.nodes, sel.containers) if drift else None
        if save_snapshot:
            drifts.save_all(connections.inventory(), sel.nodes, sel.containers)
        return changed
    finally:
        connections.close_all()
