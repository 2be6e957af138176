"""The gateway role's smg command and its variables (no host needed)."""

import pytest
from pydantic import ValidationError

from gpuhost.roles.gateway import FleetGateway, GatewayVars, smg_command


def gateway(**over: object) -> FleetGateway:
    base: dict[str, object] = {
        "node": "pve1",
        "host": "10.0.0.1",
        "port": 30080,
        "policy": "cache_aware",
        "health": {"interval_secs": 10},
        "retries": 3,
        "prometheus_port": 29000,
        "version": "1.13.0",
    }
    return FleetGateway.model_validate({**base, **over})


def test_smg_command_carries_policy_health_checks_retries_and_metrics() -> None:
    argv = smg_command("glm5", gateway())
    assert argv[:8] == [
        "/opt/gpuhost/smg/1.13.0/venv/bin/smg", "launch", "--host", "10.0.0.1", "--port", "30080", "--policy", "cache_aware",
    ]  # fmt: skip
    joined = " ".join(argv)
    assert "--health-check-endpoint /health --health-check-interval-secs 10 --health-check-timeout-secs 5" in joined
    assert "--health-failure-threshold 2 --health-success-threshold 1" in joined
    assert "--retry-max-retries 3" in joined and "--prometheus-host 10.0.0.1 --prometheus-port 29000" in joined
    assert "--worker-urls" not in joined  # the launch script reads them from their own file


def test_no_retries_and_no_metrics() -> None:
    joined = " ".join(smg_command("glm5", gateway(retries=0, prometheus_port=None)))
    assert "--disable-retries" in joined and "--retry-max-retries" not in joined and "prometheus" not in joined


def test_an_unknown_group_is_refused() -> None:
    with pytest.raises(ValidationError, match="no serving group 'nope'"):
        GatewayVars.model_validate({"sglang_group": "nope", "serving": {}})
