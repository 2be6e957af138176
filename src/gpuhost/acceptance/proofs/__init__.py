"""The acceptance suite's proofs, one module per ``verify`` kind, each a :class:`gpuhost.acceptance.proof.Suite`.

Every proof calls one named check of :mod:`gpuhost.checks` and fails with that check's finding; none
re-implements a check.
"""

from __future__ import annotations

from importlib import import_module

from gpuhost.acceptance.proof import Suite

KINDS = ("host", "lxc", "vm", "serve")


def suite(kind: str) -> Suite:
    """The suite of one kind (its module imported on demand)."""
    if kind not in KINDS:
        raise ValueError(f"no acceptance suite of kind {kind!r}")
    found: Suite = import_module(f"gpuhost.acceptance.proofs.{kind}").SUITE
    return found
