"""VM proofs: each GPU VM of the inventory (``nodes.NAME.vms``), on its node and inside its guest.

The proofs are :mod:`gpuhost.acceptance.proofs.vm`; this module makes them pytest tests (``gpuhost verify
vm`` runs the same proofs without pytest unless ``--junit-xml`` or ``-v`` asks for it).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuhost.acceptance.plugin import suite_tests
from gpuhost.acceptance.proof import Subject
from gpuhost.acceptance.proofs.vm import SUITE


@pytest.fixture(scope="module")
def subject(gpuhost_inventory: Any, gpuhost_vm: tuple[str, int]) -> Subject:
    return Subject(gpuhost_inventory, gpuhost_vm)


globals().update(suite_tests(SUITE))
