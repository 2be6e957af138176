"""Every finding of the gateway judge, whole (level, check, message, cause, fix): what an operator reads.

Scenarios: the probe's observations as tools/gateway_probe.py reports them (``state``: health and workers;
``spread``: statuses and each replica's served count) for a group of two replicas."""

from __future__ import annotations

from typing import Any

from gpuhost.checks.finding import Level
from gpuhost.checks.gateway import gateway_findings

A, B = "http://a:30000", "http://b:30000"
R = {A: "pve1/CT 200", B: "pve2/CT 201"}
GW = "http://g:30080"


def state(*workers: tuple[str, bool, str]) -> dict[str, Any]:
    return {"health": 200, "workers": [{"url": u, "healthy": h, "status": s} for u, h, s in workers]}


def whole(fs: list[Any]) -> list[tuple[Any, ...]]:
    return [(f.level, f.check, f.subject, f.message, f.cause, f.fix) for f in fs]


UP = (Level.PASS, "gateway.up", "big", f"the gateway at {GW} answers", None, None)
HEALTHY_A = (Level.PASS, "gateway.replica", "big", f"pve1/CT 200 ({A}) healthy in the gateway", None, None)
HEALTHY_B = (Level.PASS, "gateway.replica", "big", f"pve2/CT 201 ({B}) healthy in the gateway", None, None)


def test_a_gateway_that_does_not_answer_is_one_failure_naming_why() -> None:
    fix = "journalctl -u gpuhost-smg-*.service on its node; gpuhost launch sglang --group"
    down = gateway_findings("big", GW, {"health": None, "workers": None, "error": "connection refused"}, None, R)
    assert whole(down) == [
        (Level.FAIL, "gateway.up", "big", f"the gateway at {GW} does not answer (connection refused)", None, fix)
    ]
    sick = gateway_findings("big", GW, {"health": 503, "workers": []}, None, R)
    assert whole(sick) == [
        (Level.FAIL, "gateway.up", "big", f"the gateway at {GW} does not answer (/health 503)", None, fix)
    ]
    silent = gateway_findings("big", GW, {"health": None, "workers": None}, None, R)
    assert silent[0].message == f"the gateway at {GW} does not answer (/health no answer)"
    unlisted = gateway_findings("big", GW, {"health": 200, "workers": None}, None, R)
    assert unlisted[0].level is Level.FAIL and unlisted[0].check == "gateway.up"


def test_replicas_missing_unhealthy_and_extra() -> None:
    fs = gateway_findings("big", GW, state((B + "/", False, "not_ready"), ("http://c:30000", True, "ready")), None, R)
    assert whole(fs) == [
        UP,
        (
            Level.FAIL,
            "gateway.replica",
            "big",
            f"pve1/CT 200 ({A}) is not among the gateway's replicas",
            None,
            "gpuhost launch sglang --group (the gateway's replicas are made the group's)",
        ),
        (
            Level.FAIL,
            "gateway.replica",
            "big",
            f"pve2/CT 201 ({B}) is taken out by the gateway's health checks (status not_ready)",
            "the replica does not answer the gateway's health check",
            "gpuhost serve status --ctid 201; gpuhost serve logs",
        ),
        (Level.WARN, "gateway.replica", "big", "the gateway also routes to http://c:30000", None, None),
    ]


def test_requests_spread_over_both_replicas_pass_with_the_counts() -> None:
    spread = {"statuses": [200] * 6, "served": {A: 4, B: 2}}
    fs = gateway_findings("big", GW, state((A, True, "ready"), (B, True, "ready")), spread, R, every_replica=True)
    assert whole(fs) == [
        UP,
        HEALTHY_A,
        HEALTHY_B,
        (
            Level.PASS,
            "gateway.requests",
            "big",
            f"6/6 requests through {GW} answered; served by pve1/CT 200: 4, pve2/CT 201: 2",
            None,
            None,
        ),
    ]


def test_unanswered_requests_fail_with_their_statuses() -> None:
    spread = {"statuses": [200, 503, None, 503], "served": {A: 1, B: 0}}
    fs = gateway_findings("big", GW, state((A, True, "ready"), (B, True, "ready")), spread, R)
    assert whole(fs)[-1] == (
        Level.FAIL,
        "gateway.requests",
        "big",
        f"1/4 requests through {GW} answered (statuses ['200', '503', 'None'])",
        None,
        "gpuhost verify serve on each replica; journalctl -u gpuhost-smg-*.service",
    )
    none = gateway_findings("big", GW, state((A, True, "ready"), (B, True, "ready")), {"statuses": []}, R)
    assert none[-1].level is Level.FAIL and none[-1].message == f"0/0 requests through {GW} answered (statuses [])"


def test_counts_that_miss_requests_fail_naming_each_replica() -> None:
    spread = {"statuses": [200] * 4, "served": {A: 1, B: 1}}
    fs = gateway_findings("big", GW, state((A, True, "ready"), (B, True, "ready")), spread, R)
    assert whole(fs)[-1] == (
        Level.FAIL,
        "gateway.requests",
        "big",
        f"4/4 requests through {GW} answered but the replicas counted 2 (pve1/CT 200: 1, pve2/CT 201: 1)",
        None,
        None,
    )


def test_unknown_counts_warn_with_the_reason() -> None:
    spread = {"statuses": [200] * 4, "served": {A: None, B: None}}
    fs = gateway_findings("big", GW, state((A, True, "ready"), (B, True, "ready")), spread, R)
    assert whole(fs)[-1] == (
        Level.WARN,
        "gateway.requests",
        "big",
        f"4/4 requests through {GW} answered; which replica served them is unknown",
        "the replicas expose no sglang:num_requests_total (--enable-metrics)",
        None,
    )


def test_an_idle_replica_fails_a_spreading_policy_only() -> None:
    spread = {"statuses": [200] * 4, "served": {A: 4, B: 0}}
    two = state((A, True, "ready"), (B, True, "ready"))
    spreading = gateway_findings("big", GW, two, spread, R, every_replica=True)
    assert whole(spreading)[-1] == (
        Level.FAIL,
        "gateway.requests",
        "big",
        f"4/4 requests through {GW} answered but not spread: pve2/CT 201 got none (pve1/CT 200: 4, pve2/CT 201: 0)",
        None,
        None,
    )
    assert gateway_findings("big", GW, two, spread, R)[-1].level is Level.PASS


def test_one_live_replica_need_not_spread_and_a_dead_one_is_not_counted() -> None:
    spread = {"statuses": [200] * 3, "served": {A: 3, B: 0}}
    fs = gateway_findings("big", GW, state((A, True, "ready"), (B, False, "down")), spread, R, every_replica=True)
    assert whole(fs)[-1] == (
        Level.PASS,
        "gateway.requests",
        "big",
        f"3/3 requests through {GW} answered; served by pve1/CT 200: 3",
        None,
        None,
    )


def test_a_count_missing_for_one_replica_shows_a_question_mark() -> None:
    spread = {"statuses": [200] * 2, "served": {A: 2}}
    fs = gateway_findings("big", GW, state((A, True, "ready"), (B, True, "ready")), spread, R)
    assert fs[-1].level is Level.PASS
    assert fs[-1].message == f"2/2 requests through {GW} answered; served by pve1/CT 200: 2, pve2/CT 201: ?"


def test_without_a_spread_only_the_gateway_and_its_replicas_are_judged() -> None:
    fs = gateway_findings("big", GW, state((A, True, "ready"), (B, True, "ready")), None, R)
    assert whole(fs) == [UP, HEALTHY_A, HEALTHY_B]


def test_a_replica_missing_from_the_gateway_is_not_counted_among_the_live_ones() -> None:
    spread = {"statuses": [200] * 2, "served": {A: 2}}
    fs = gateway_findings(
        "big", GW, state((A, True, "ready"), ("http://c:30000", True, "ready")), spread, R, every_replica=True
    )
    assert fs[-1].message == f"2/2 requests through {GW} answered; served by pve1/CT 200: 2"
    two_extra = gateway_findings(
        "big",
        GW,
        state((A, True, "ready"), (B, True, "ready"), ("http://c:1", True, "ready"), ("http://d:1", True, "ready")),
        None,
        R,
    )
    assert two_extra[-1].message == "the gateway also routes to http://c:1, http://d:1"


def test_a_dead_replica_named_with_its_ctid_and_two_idle_ones_listed() -> None:
    r3 = {**R, "http://e:30000": "pve3/CT 305"}
    fs = gateway_findings(
        "big", GW, state((A, True, "ready"), (B, False, "down"), ("http://e:30000", False, "down")), None, r3
    )
    assert [f.fix for f in fs if f.level is Level.FAIL] == [
        "gpuhost serve status --ctid 201; gpuhost serve logs",
        "gpuhost serve status --ctid 305; gpuhost serve logs",
    ]
    spread = {"statuses": [200] * 3, "served": {A: 3, B: 0, "http://e:30000": 0}}
    live = state((A, True, "ready"), (B, True, "ready"), ("http://e:30000", True, "ready"))
    idle = gateway_findings("big", GW, live, spread, r3, every_replica=True)[-1]
    assert idle.message.startswith(
        f"3/3 requests through {GW} answered but not spread: pve2/CT 201, pve3/CT 305 got none"
    )
