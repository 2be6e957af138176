"""Host proofs: the node booted as provisioned (IOMMU, driver, device nodes, persistence, VM binding).

The proofs are :mod:`gpuhost.acceptance.proofs.host`; this module makes them pytest tests (``gpuhost verify
host`` runs the same proofs without pytest unless ``--junit-xml`` or ``-v`` asks for it).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuhost.acceptance.plugin import suite_tests
from gpuhost.acceptance.proof import Subject
from gpuhost.acceptance.proofs.host import SUITE


@pytest.fixture(scope="module")
def subject(gpuhost_inventory: Any, gpuhost_node: str) -> Subject:
    return Subject(gpuhost_inventory, gpuhost_node)


globals().update(suite_tests(SUITE))
