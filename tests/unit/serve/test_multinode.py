"""Multi-node tensor parallelism: rank-0 and follower commands, the port lint, the start order."""

from typing import Any

import pytest

from gpuhost.checks.finding import Level
from gpuhost.serve.facts import TargetFacts
from gpuhost.serve.multinode import PORTS_CHECK, check_multinode, ports, render_rank, start_order
from gpuhost.serve.profile import Profile
from gpuhost.serve.validate import refused, validate


def profile(**multinode: Any) -> Profile:
    mn = {"nnodes": 2, "socket_ifname": "ens1f0", **multinode}
    return Profile.model_validate(
        {
            "name": "glm5-tp16-2node",
            "pins": {"sglang": "0.5.23", "transformers": "5.19.0"},
            "model": "nvidia/GLM-5-NVFP4",
            "model_type": "glm_moe_dsa",
            "architectures": ["sm120"],
            "gpus": 8,
            "tp_size": 16,
            "flags": {"--quantization": "modelopt_fp4", "--host": "0.0.0.0", "--port": 30000},
            "multinode": mn,
        }
    )


def after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_rank0_and_follower_share_the_rendezvous_and_differ_only_in_rank() -> None:
    p = profile()
    r0 = render_rank(p, 0, "10.0.0.1")
    r1 = render_rank(p, 1, "10.0.0.1")
    for cmd, rank in ((r0, "0"), (r1, "1")):
        a = cmd.argv
        assert a[:2] == ["sglang", "serve"] and after(a, "--tp-size") == "16"  # TP is global
        assert after(a, "--nnodes") == "2" and after(a, "--node-rank") == rank
        assert after(a, "--dist-init-addr") == "10.0.0.1:20000"  # rank 0's address on every node
        assert after(a, "--nccl-port") == "20010" and after(a, "--dist-timeout") == "3600"
        assert cmd.env["NCCL_SOCKET_IFNAME"] == cmd.env["GLOO_SOCKET_IFNAME"] == "ens1f0"
    diff = [(x, y) for x, y in zip(r0.argv, r1.argv, strict=True) if x != y]
    assert diff == [("0", "1")]


def test_ipv6_rank0_is_bracketed_and_a_rank_outside_the_group_is_refused() -> None:
    p = profile()
    assert after(render_rank(p, 1, "fd00::1").argv, "--dist-init-addr") == "[fd00::1]:20000"
    with pytest.raises(ValueError, match="outside 0..1"):
        render_rank(p, 2, "10.0.0.1")
    single = profile().model_copy(update={"multinode": None})
    with pytest.raises(ValueError, match="not a multi-node profile"):
        render_rank(single, 0, "10.0.0.1")


def test_ports_to_open_between_the_nodes() -> None:
    assert ports(profile()) == {
        "dist-init (rank 0)": [20000],
        "zmq (rank 0)": [20001, 20002, 20003, 20004, 20005, 20006],
        "nccl (every node)": [20010],
        "http api (rank 0)": [30000],
    }


def test_lint_passes_a_sane_profile_and_names_what_to_open() -> None:
    (f,) = check_multinode(profile())
    assert f.level is Level.PASS and "20001-20006" in f.message and "nccl (every node) 20010" in f.message


@pytest.mark.parametrize(
    ("multinode", "level", "text"),
    [
        ({"nccl_port": 20003}, Level.FAIL, "inside the rendezvous/ZMQ block 20000-20006"),
        ({"dist_init_port": 29995}, Level.FAIL, "HTTP port 30000 collides"),
        ({"dist_init_port": 40000, "nccl_port": 40100}, Level.WARN, "ephemeral range"),
        ({"nccl_port": 45000}, Level.WARN, "ports 45000…45000 in Linux's ephemeral range"),
        ({"socket_ifname": None}, Level.WARN, "no socket_ifname"),
        ({"dist_init_port": 65532}, Level.FAIL, "beyond 65535"),
    ],
)
def test_lint_port_collisions(multinode: dict[str, Any], level: Level, text: str) -> None:
    found = [f for f in check_multinode(profile(**multinode)) if f.level is level]
    assert any(text in f.message for f in found), check_multinode(profile(**multinode))


def test_lint_sizes_and_flags_set_by_hand() -> None:
    bad = profile().model_copy(update={"tp_size": 12})
    assert any("not 8 GPUs per node" in f.message for f in check_multinode(bad) if f.level is Level.FAIL)
    hand = profile().model_copy(update={"flags": {"--node-rank": 1, "--nnodes": 2}})
    assert any("--nnodes, --node-rank in flags" in f.message for f in check_multinode(hand))


def test_validate_counts_gpus_per_node_and_refuses_a_bad_port_plan() -> None:
    facts = TargetFacts(gpu_archs=["sm120"] * 8, driver_version="580.95.05")
    good = validate(profile(), facts)
    assert not [f for f in good if f.check == "serve.rule.gpu-count" and f.failed]  # 8 per node, not 16
    assert any(f.check == PORTS_CHECK for f in good)
    assert refused(validate(profile(nccl_port=20001), facts))


def test_start_order_is_rank0_first() -> None:
    assert start_order(3) == [0, 1, 2]
