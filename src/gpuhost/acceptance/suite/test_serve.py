"""Serving proofs: each container with a ``serve:`` entry (``gpuhost launch sglang``), through ``pct exec``.

The proofs are :mod:`gpuhost.acceptance.proofs.serve`; this module makes them pytest tests (``gpuhost verify
serve`` runs the same proofs without pytest unless ``--junit-xml`` or ``-v`` asks for it).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuhost.acceptance.plugin import suite_tests
from gpuhost.acceptance.proof import Subject
from gpuhost.acceptance.proofs.serve import SUITE


@pytest.fixture(scope="module")
def subject(gpuhost_inventory: Any, gpuhost_server: tuple[str, int]) -> Subject:
    return Subject(gpuhost_inventory, gpuhost_server)


globals().update(suite_tests(SUITE))
