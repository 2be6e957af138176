"""Serving proofs (unit active, /health 200, launch flags in effect = the profile, the accuracy canary).

Pluggable: the proofs live in ``gpuhost.checks.serve`` (from ``gpuhost launch sglang``), which provides
``servers(inventory) -> list[str]`` (ids ``NODE/CTID`` of the inventory's serving guests) and
``serve_findings(inventory, server_id) -> list[Finding]``. Until that module exists no guest can be
declared as serving, and the test skips naming the missing capability.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest

from gpuhost.acceptance.plugin import reachable


def _serve() -> ModuleType | None:
    try:
        return importlib.import_module("gpuhost.checks.serve")
    except ModuleNotFoundError:
        return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "server" not in metafunc.fixturenames:
        return
    from gpuhost.acceptance import backend
    from gpuhost.acceptance.plugin import NoGuest

    serve = _serve()
    if serve is None:
        params: list[Any] = [
            NoGuest(
                "no serving guests: this gpuhost has no serving proofs (gpuhost.checks.serve, gpuhost launch sglang)"
            )
        ]
    else:
        params = list(serve.servers(backend.inventory())) or [NoGuest("no serving guests in the inventory")]
    metafunc.parametrize("server", params, ids=str)


def test_serving(server: Any, gpuhost_inventory: Any, prove: Any) -> None:
    from gpuhost.acceptance.plugin import NoGuest

    if isinstance(server, NoGuest):
        pytest.skip(server.reason)
    serve = _serve()
    assert serve is not None
    prove(list(reachable(lambda: serve.serve_findings(gpuhost_inventory, server))))
