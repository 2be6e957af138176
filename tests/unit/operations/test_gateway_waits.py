"""The gateway's operations return waits: its worker API is waited for before its replicas are synced, and
readiness is every replica healthy in the gateway's own checks, no other routed to, within the bound."""

from __future__ import annotations

from typing import Any

from gpuhost.core.actions import RunCommand
from gpuhost.operations.gateway import GatewayReady, GatewayReadyArgs, GatewayWorkers, GatewayWorkersArgs
from tests.wait_harness import Readings, run_waits

URL = "http://127.0.0.1:8080"
A, B = "http://10.0.0.11:30000", "http://10.0.0.12:30000"


def state(health: int | None, workers: list[tuple[str, bool]] | None) -> dict[str, Any]:
    listed = None if workers is None else [{"url": u, "id": str(i), "healthy": h} for i, (u, h) in enumerate(workers)]
    return {"health": health, "workers": listed, "error": None if health else "connection refused"}


def test_a_gateway_that_does_not_answer_yet_is_waited_for_then_synced() -> None:
    looks = [state(None, None), state(None, None), state(200, [(A, True)])]
    host = Readings({"smg state": iter(looks)})
    plan = GatewayWorkers(GatewayWorkersArgs(group="g", url=URL, replicas=(A, B), timeout_s=30, poll_s=1)).plan(host)  # type: ignore[arg-type]
    assert plan.changes and len(plan.waits) == 1 and isinstance(plan.actions[1], RunCommand)
    assert plan.reason.startswith("the gateway does not answer yet (/health no answer; connection refused)")
    (out,) = run_waits(plan, host)
    assert out.ok and out.message == f"the gateway at {URL} answers" and host.looks == 3


def test_ready_waits_for_every_replica_healthy_and_a_removed_one_gone() -> None:
    looks = [state(200, [(A, True), (B, False), ("http://10.0.0.9:30000", True)]), state(200, [(A, True), (B, True)])]
    host = Readings({"smg state": iter(looks)})
    plan = GatewayReady(GatewayReadyArgs(group="g", url=URL, replicas=(A, B), timeout_s=30, poll_s=1)).plan(host)  # type: ignore[arg-type]
    assert not plan.changes and host.looks == 0
    (out,) = run_waits(plan, host)
    assert out.ok and out.message == f"{URL} up, 2/2 replicas healthy" and host.looks == 2


def test_ready_gives_up_naming_the_replicas_that_are_not_healthy() -> None:
    host = Readings({"smg state": iter([state(200, [(A, True), (B, False)])] * 20)})
    plan = GatewayReady(GatewayReadyArgs(group="g", url=URL, replicas=(A, B), timeout_s=5, poll_s=1)).plan(host)  # type: ignore[arg-type]
    (out,) = run_waits(plan, host)
    assert not out.ok and out.message.startswith("gave up after 5 s waiting until")
    assert f"(1/2 replicas healthy; not healthy: {B}); journalctl -u gpuhost-smg-g.service" in out.message
