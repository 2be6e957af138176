"""The gateway routes to exactly the group's replicas, without the smg wheel.

The worker API is answered by a small HTTP server on 127.0.0.1 that behaves as real smg 1.13.0 was observed to
(shared reference sglang-behaviour-2026-12.md, "worker API" row, run against ``smg launch``): ``GET /workers`` lists
``{url, id, is_healthy, status}``, ``POST /workers {"url"}`` answers 202 and 409 for a known URL, ``DELETE
/workers/ID`` answers 202, and a removed worker stays listed as ``draining`` and unhealthy for a while.

Two layers: the shipped probe's ``sync`` (what changes the gateway's set), and the ``smg_workers``/``smg_ready``
plans (what gpuhost decides from the set it sees).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpuhost.core.actions import RunCommand
from gpuhost.facts import gateway as gw
from gpuhost.operations.gateway import GatewayReady, GatewayReadyArgs, GatewayWorkers, GatewayWorkersArgs
from gpuhost.tools import gateway_probe
from tests.wait_harness import Readings, run_waits

A, B, C = "http://10.0.0.1:30000", "http://10.0.0.2:30000", "http://10.0.0.3:30000"


class Gateway:
    """The observed worker API of smg 1.13.0 (see the module docstring)."""

    def __init__(self, urls: list[str]) -> None:
        self.workers: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.next = 0
        for url in urls:
            self.add(url)

    def add(self, url: str) -> None:
        self.next += 1
        self.workers[f"w{self.next}"] = {"id": f"w{self.next}", "url": url, "is_healthy": True, "status": "ready"}


@pytest.fixture
def gateway() -> Iterator[tuple[str, Gateway]]:
    state = Gateway([A, C])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            state.calls.append(("GET", self.path))
            if self.path == "/health":
                self._send(200, "OK")
            elif self.path == "/workers":
                self._send(200, {"workers": list(state.workers.values())})
            else:
                self._send(404, {})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.calls.append(("POST", body["url"]))
            if any(w["url"] == body["url"] for w in state.workers.values()):
                self._send(409, {"error": "WORKER_ALREADY_EXISTS"})
            else:
                state.add(body["url"])
                self._send(202, {"status": "queued"})

        def do_DELETE(self) -> None:  # noqa: N802
            wid = self.path.rsplit("/", 1)[-1]
            state.calls.append(("DELETE", wid))
            state.workers.pop(wid, None)
            self._send(202, {"status": "queued"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def test_sync_adds_the_missing_replica_and_removes_the_other(gateway: tuple[str, Gateway]) -> None:
    url, state = gateway
    out = gateway_probe.sync(url, None, [A, B])
    assert out["added"] == [B] and out["removed"] == [C] and out["error"] is None
    assert sorted(w["url"] for w in out["workers"]) == [A, B]
    assert sorted(w["url"] for w in state.workers.values()) == [A, B]
    assert ("POST", A) not in state.calls  # a replica it already routes to is left alone


def test_sync_with_the_same_set_changes_nothing(gateway: tuple[str, Gateway]) -> None:
    url, state = gateway
    out = gateway_probe.sync(url, None, [C, A])
    assert out["added"] == [] and out["removed"] == []
    assert [c for c in state.calls if c[0] != "GET"] == []


def test_sync_to_no_replicas_removes_every_one(gateway: tuple[str, Gateway]) -> None:
    url, state = gateway
    out = gateway_probe.sync(url, None, [])
    assert sorted(out["removed"]) == [A, C] and state.workers == {}


class Host:
    """A host whose gateway_state fact is what the fake gateway lists (the nonce argument changes each poll)."""

    check = False
    name = "pve1"

    def __init__(self, states: list[dict[str, Any]]) -> None:
        self.states = states
        self.polls = 0

    def fact(self, fact: Any, *args: Any) -> Any:
        assert fact is gw.gateway_state, fact
        self.polls += 1
        return self.states[min(self.polls, len(self.states)) - 1]


def listed(*urls: str, unhealthy: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "health": 200,
        "workers": [{"url": u, "id": u[-7:], "healthy": u not in unhealthy, "status": "ready"} for u in urls],
    }


def workers_plan(have: dict[str, Any], want: tuple[str, ...]) -> Any:
    args = GatewayWorkersArgs(group="big", url="http://127.0.0.1:30080", replicas=want, timeout_s=1, poll_s=0.01)
    return GatewayWorkers(args).plan(Host([have]))  # type: ignore[arg-type]


def test_the_same_set_is_converged_whatever_the_order_and_trailing_slashes() -> None:
    plan = workers_plan(listed(A + "/", C), (C, A))
    assert not plan.changes and plan.reason == "routes to 2 replicas"


def test_a_changed_set_is_synced_with_exactly_the_group_replicas() -> None:
    plan = workers_plan(listed(A, C), (A, B))
    assert plan.reason == f"add {B}, remove {C}"
    (action,) = plan.actions
    assert isinstance(action, RunCommand)
    assert f"--want {A}" in action.command and f"--want {B}" in action.command and C not in action.command


def test_an_extra_replica_alone_is_a_change() -> None:
    plan = workers_plan(listed(A, B, C), (A, B))
    assert plan.reason == f"remove {C}"


def test_a_missing_replica_alone_is_a_change() -> None:
    plan = workers_plan(listed(A), (A, B))
    assert plan.reason == f"add {B}"


def ready(states: list[dict[str, Any]], want: tuple[str, ...], timeout_s: float = 5) -> Any:
    """The readiness wait run over successive reads of the gateway's state (the runner's part, by the harness)."""
    args = GatewayReadyArgs(group="big", url="http://127.0.0.1:30080", replicas=want, timeout_s=timeout_s, poll_s=1)
    host = Readings({"smg state": iter(states)})
    (out,) = run_waits(GatewayReady(args).plan(host), host)  # type: ignore[arg-type]
    return out


def test_ready_waits_for_a_removed_replica_to_go_then_passes() -> None:
    draining = listed(A, B, C, unhealthy=(C,))
    out = ready([draining, draining, listed(A, B)], (A, B))
    assert out.ok and out.message == "http://127.0.0.1:30080 up, 2/2 replicas healthy"


def test_ready_fails_naming_the_replica_still_routed_to_and_the_unhealthy_one() -> None:
    out = ready([listed(A, B, C, unhealthy=(B,))] * 20, (A, B))
    assert not out.ok
    assert f"1/2 replicas healthy; not healthy: {B}; still routed to: {C}" in out.message
