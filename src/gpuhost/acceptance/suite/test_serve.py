"""Serving proofs: each container with a ``serve:`` entry (``gpuhost launch sglang``), through ``pct exec``.

The unit is active; the shipped probe (``gpuhost/tools/serve_probe.py``, run in the container once per server)
finds ``/health`` 200, a smoke completion, the accuracy canary with finite log-probabilities, ``/server_info``
showing the launch settings the profile asked for (recorded at launch in ``launched.json``), and single-stream
speed (INFO). Every judgment is a :mod:`gpuhost.checks.serve` check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpuhost.acceptance.plugin import reachable
from gpuhost.checks import serve as checks
from gpuhost.facts import serve_layout


@dataclass(frozen=True)
class Server:
    subject: str
    active: str
    launched: dict[str, Any]
    probe: dict[str, Any]

    @property
    def expect(self) -> dict[str, str]:
        e = self.launched.get("expect")
        return dict(e) if isinstance(e, dict) else {}


@pytest.fixture(scope="module")
def server(gpuhost_server: tuple[str, int]) -> Server:
    from gpuhost.acceptance.backend import node_connection
    from gpuhost.serve.service import probe_on, service_state

    node, ctid = gpuhost_server

    def read() -> Server:
        conn = node_connection(node)
        active, _token, launched = service_state(conn, ctid)
        data: dict[str, Any] = {"health": None, "error": f"{serve_layout.UNIT} is {active}"}
        if active == "active":
            data, launched = probe_on(conn, ctid, "verify", launched)
        return Server(f"{node}/CT {ctid}", active, launched, data)

    return reachable(read)  # type: ignore[no-any-return]


def test_unit(server: Server, prove: Any) -> None:
    prove(checks.check_unit(server.active, server.subject, serve_layout.UNIT))


def test_health(server: Server, prove: Any) -> None:
    prove(checks.check_health(server.probe, server.subject))


def test_smoke(server: Server, prove: Any) -> None:
    prove(checks.check_smoke(server.probe, server.subject))


def test_canary(server: Server, prove: Any) -> None:
    prove(checks.check_canary(server.probe, server.subject))


def test_logprobs(server: Server, prove: Any) -> None:
    prove(checks.check_logprobs(server.probe, server.subject))


def test_server_info(server: Server, prove: Any) -> None:
    if not server.expect:
        pytest.fail(
            f"serve.server-info {server.subject}: no launch expectation recorded "
            f"({serve_layout.STATE_FILE}: not launched by gpuhost launch sglang)",
            pytrace=False,
        )
    if server.probe.get("health") != 200:  # nothing to read: serve.health already failed, and says why
        why = server.probe.get("error") or "see serve.health"
        pytest.skip(f"serve.server-info: not read, the server is not healthy ({why})")
    prove(checks.check_server_info(server.probe, server.expect, server.subject))


def test_speed(server: Server, prove: Any) -> None:
    found = checks.check_speed(server.probe, server.subject)
    if not found:
        pytest.skip("serve.speed: the probe made no streamed request (server not healthy)")
    prove(found)
