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
    # retries: 3 is 4 attempts: smg's --retry-max-retries counts attempts (3 gave 1 + 2 retries against a 503 worker,
    # smg 1.13.0 on loopback; its help: --disable-retries "equivalent to setting retry_max_retries=1")
    assert "--retry-max-retries 4" in joined and "--prometheus-host 10.0.0.1 --prometheus-port 29000" in joined
    assert "--worker-urls" not in joined  # the launch script reads them from their own file


def test_no_retries_and_metrics_kept_on_loopback() -> None:
    # smg 1.13.0 without --prometheus-* still binds 0.0.0.0:29000 (its log: "Metrics server listening on
    # 0.0.0.0:29000"), so "no metrics" is loopback only, beside the gateway's own port
    joined = " ".join(smg_command("glm5", gateway(retries=0, prometheus_port=None)))
    assert "--disable-retries" in joined and "--retry-max-retries" not in joined
    assert "--prometheus-host 127.0.0.1 --prometheus-port 30081" in joined


def test_an_unknown_group_is_refused() -> None:
    with pytest.raises(ValidationError, match="no serving group 'nope'"):
        GatewayVars.model_validate({"sglang_group": "nope", "serving": {}})


def test_the_model_asked_for_through_smg_is_what_the_replica_serves() -> None:
    # smg 1.13.0 routes by model id: "default" got 404 model_not_found on loopback; SGLang serves a profile
    # without --served-model-name under its model path (0.5.23 arg_groups/serving_hook.py:642)
    from gpuhost.serve.profile import load_profiles, served_model_name

    shipped = load_profiles()["glm5-nvfp4-tp8-sm120"]
    assert served_model_name(shipped, "/srv/models/GLM-5-NVFP4") == "glm-5"
    unnamed = shipped.model_copy(
        update={"flags": {k: v for k, v in shipped.flags.items() if k != "--served-model-name"}}
    )
    assert served_model_name(unnamed, "/srv/models/GLM-5-NVFP4") == "/srv/models/GLM-5-NVFP4"
    assert served_model_name(unnamed) == "nvidia/GLM-5-NVFP4"
