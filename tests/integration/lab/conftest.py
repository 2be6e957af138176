"""Lab integration tests: real sshd per simulated PVE node on 127.77.0.0/16 (root required)."""

from tests.lab_fixtures import lab  # noqa: F401
