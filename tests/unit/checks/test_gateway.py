"""Judging the gateway from its probe: a dead replica named, requests answered, spread over the replicas."""

from gpuhost.checks.finding import Level
from gpuhost.checks.gateway import gateway_findings

R = {"http://a:30000": "pve1/CT 200", "http://b:30000": "pve2/CT 200"}


def workers(*healthy: bool) -> dict[str, object]:
    return {
        "health": 200,
        "workers": [
            {"url": u, "healthy": h, "status": "ready" if h else "not_ready"} for u, h in zip(R, healthy, strict=True)
        ],
    }


def levels(fs: list) -> dict[str, Level]:  # type: ignore[type-arg]
    out: dict[str, Level] = {}
    for f in fs:
        out[f.check] = max(out.get(f.check, Level.PASS), f.level)
    return out


def test_all_healthy_and_spread_passes() -> None:
    spread = {"statuses": [200] * 6, "served": {"http://a:30000": 3, "http://b:30000": 3}}
    fs = gateway_findings("gw", "http://g:30080", workers(True, True), spread, R, every_replica=True)
    assert all(f.level is Level.PASS for f in fs)
    assert "6/6 requests" in fs[-1].message and "pve1/CT 200: 3, pve2/CT 200: 3" in fs[-1].message


def test_a_dead_replica_is_named_while_the_endpoint_answers() -> None:
    spread = {"statuses": [200] * 4, "served": {"http://a:30000": 4}}
    fs = gateway_findings("gw", "http://g:30080", workers(True, False), spread, R)
    dead = [f for f in fs if f.failed]
    assert len(dead) == 1 and "pve2/CT 200 (http://b:30000) is taken out" in dead[0].message
    assert levels(fs)["gateway.requests"] is Level.PASS


def test_not_spread_fails_only_for_a_spreading_policy() -> None:
    spread = {"statuses": [200] * 6, "served": {"http://a:30000": 6, "http://b:30000": 0}}
    assert (
        levels(gateway_findings("gw", "u", workers(True, True), spread, R, every_replica=True))["gateway.requests"]
        is Level.FAIL
    )
    assert levels(gateway_findings("gw", "u", workers(True, True), spread, R))["gateway.requests"] is Level.PASS


def test_unanswered_requests_and_a_down_gateway_fail() -> None:
    spread = {"statuses": [200, 503, None], "served": {}}
    assert levels(gateway_findings("gw", "u", workers(True, True), spread, R))["gateway.requests"] is Level.FAIL
    fs = gateway_findings("gw", "u", {"health": None, "workers": None, "error": "refused"}, None, R)
    assert [f.check for f in fs] == ["gateway.up"] and fs[0].failed and "refused" in fs[0].message


def test_counts_that_do_not_add_up_fail_and_missing_metrics_warn() -> None:
    short = {"statuses": [200] * 4, "served": {"http://a:30000": 1, "http://b:30000": 1}}
    assert levels(gateway_findings("gw", "u", workers(True, True), short, R))["gateway.requests"] is Level.FAIL
    unknown = {"statuses": [200] * 4, "served": {"http://a:30000": None, "http://b:30000": None}}
    assert levels(gateway_findings("gw", "u", workers(True, True), unknown, R))["gateway.requests"] is Level.WARN
