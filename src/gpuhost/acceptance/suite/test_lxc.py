"""Container proofs: each GPU container of the inventory, through ``pct exec`` on its node.

The proofs are :mod:`gpuhost.acceptance.proofs.lxc`; this module makes them pytest tests (``gpuhost verify
lxc`` runs the same proofs without pytest unless ``--junit-xml`` or ``-v`` asks for it).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuhost.acceptance.plugin import suite_tests
from gpuhost.acceptance.proof import Subject
from gpuhost.acceptance.proofs.lxc import SUITE


@pytest.fixture(scope="module")
def subject(gpuhost_inventory: Any, gpuhost_ct: tuple[str, int]) -> Subject:
    return Subject(gpuhost_inventory, gpuhost_ct)


globals().update(suite_tests(SUITE))
