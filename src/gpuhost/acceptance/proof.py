"""The acceptance suite's proofs as data, run the same way by pytest and without it.

A :class:`Suite` is what ``gpuhost verify KIND`` proves about each of its subjects (a node, a container, a VM,
a server): the *reads* (functions of a :class:`Subject`, each run once per subject, whose failure or skip
repeats for every proof that needs it, as a module-scoped fixture's does) and the *proofs* (one test each:
one named check called through a :class:`Prover`). :mod:`gpuhost.acceptance.suite` turns a suite into pytest
tests; :mod:`gpuhost.acceptance.plain` runs it without pytest's start-up. Neither holds a wiring of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gpuhost.checks.finding import Finding, Level

T = TypeVar("T")


class ProofFailed(Exception):
    """A proof (or a read it needs) failed; the message is the test's failure text."""


class ProofSkipped(Exception):
    """A proof (or a read it needs) does not apply; the message says why."""


def describe(f: Finding) -> str:
    """A finding as the failure message of its test: check, subject and message, then cause and fix."""
    from gpuhost.redact import redact

    lines = [f"{f.check} {f.subject}: {redact(f.message)}"]
    if f.cause:
        lines.append(f"  cause: {redact(f.cause)}")
    if f.fix:
        lines.append(f"  fix:   {redact(f.fix)}")
    return "\n".join(lines)


def reachable(fn: Callable[[], T]) -> T:
    """Run a fact read; a connection or fact error fails the proof naming it (never a traceback)."""
    from gpuhost.errors import GpuhostError

    try:
        return fn()
    except GpuhostError as exc:
        raise ProofFailed(f"reachable: {exc}") from exc


class Prover:
    """``prove(check_fn, *args, not_applicable='why')``: call a registered check and record its finding.

    Findings (and the check's name) go into ``properties`` as ``("finding", json)`` and ``("check", name)``:
    pytest's ``user_properties`` of the test (and so its JUnit XML), or a plain list. A FAIL raises
    :class:`ProofFailed` with the finding's text; a check that does not apply (returns ``None``) raises
    :class:`ProofSkipped` with ``not_applicable``. ``label`` names the check and subject of a test before it
    calls one (a test that fails first still says which check it was).
    """

    def __init__(self, properties: list[tuple[str, Any]]) -> None:
        self.properties = properties

    def label(self, check: str, subject: str) -> None:
        self.properties += [("check", check), ("subject", subject)]

    def record(self, findings: list[Finding]) -> None:
        for f in findings:
            self.properties.append(("finding", json.dumps(f.to_json())))
        failed = [f for f in findings if f.level >= Level.FAIL]
        if failed:
            raise ProofFailed("\n".join(describe(f) for f in failed))

    def __call__(
        self, fn: Callable[..., Finding | list[Finding] | None] | list[Finding], *args: Any, not_applicable: str = ""
    ) -> Any:
        if isinstance(fn, list):  # findings a check already returned
            self.record(fn)
            return fn
        name = getattr(fn, "check_name", fn.__name__)
        self.properties.append(("check", name))
        finding = fn(*args)
        if finding is None or finding == []:
            raise ProofSkipped(f"{name}: {not_applicable or 'does not apply to this host'}")
        self.record(finding if isinstance(finding, list) else [finding])
        return finding


def iter_findings(properties: list[tuple[str, Any]]) -> Iterator[Finding]:
    for key, value in properties:
        if key == "finding":
            d = json.loads(value)
            yield Finding(Level[d["level"]], d["check"], d["subject"], d["message"], d["cause"], d["fix"])


Read = Callable[["Subject"], Any]


@dataclass(frozen=True)
class Proof:
    """One test: ``name`` (``test_NAME``), what it ``needs`` read first, and ``run(subject, prove)``.

    Proofs sharing a name are one parametrised test, each with its ``param`` (the id of a registry entry)."""

    name: str
    run: Callable[[Subject, Prover], None]
    needs: tuple[Read, ...] = ()
    param: str | None = None


@dataclass(frozen=True)
class Suite:
    """The proofs of one ``verify`` kind: ``module`` is its pytest module's file name, ``field`` the
    :class:`gpuhost.acceptance.selection.Selection` field its subjects come from."""

    kind: str
    module: str
    field: str
    proofs: tuple[Proof, ...]

    def groups(self) -> dict[str, list[Proof]]:
        """The proofs by test name, in order (a parametrised test's entries together)."""
        out: dict[str, list[Proof]] = {}
        for p in self.proofs:
            out.setdefault(p.name, []).append(p)
        for name, group in out.items():
            if len({p.needs for p in group}) != 1:
                raise ValueError(f"test_{name}: its entries need different reads")
        return out


@dataclass
class Subject:
    """One subject of a suite: the inventory, its ``key`` (a node name, or a ``(node, id)`` pair), and the
    reads made so far (each made once; a read that failed or skipped raises the same again)."""

    inventory: Any
    key: Any
    _done: dict[Read, tuple[bool, Any]] = field(default_factory=dict)

    def read(self, fn: Callable[[Subject], T]) -> T:
        if fn not in self._done:
            try:
                self._done[fn] = (True, fn(self))
            except Exception as exc:  # a defect's too: made once, as a module fixture's
                self._done[fn] = (False, exc)
        ok, value = self._done[fn]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def require(self, needs: tuple[Read, ...]) -> None:
        for fn in needs:
            self.read(fn)
