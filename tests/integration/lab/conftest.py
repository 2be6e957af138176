"""Lab integration tests: real sshd per simulated PVE node on 127.77.0.0/16 (root required)."""

import pytest

from tests.lab_fixtures import lab  # noqa: F401


def pytest_collection_modifyitems(items):  # noqa: ANN001, ANN201
    for item in items:
        if "/integration/lab/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
