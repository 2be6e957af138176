"""A replica over two nodes through the real inventory loader, playbook and role: the commands each member renders,
the order of the staged launch (rank 0 started and listening before any follower starts, readiness and proof from
rank 0 alone), what is refused before any host is contacted, and the rendezvous wait on its facts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gpuhost.errors import ConfigError
from gpuhost.facts.rendezvous import Reach, RendezvousWatch
from gpuhost.facts.serve import ServiceState
from gpuhost.inventory.loader import load_inventory, serving_vars
from gpuhost.operations.lxc import InCt
from gpuhost.operations.sglang import SglangReady, SglangService, SglangVerify
from gpuhost.operations.sglang_multinode import RendezvousArgs, SglangRendezvous
from gpuhost.playbook.loader import load_playbook
from gpuhost.playbook.variables import Layer
from gpuhost.roles.sglang import Launch, SglangVars, container_tasks
from gpuhost.runner.prepare import prepare
from gpuhost.templating import Templates
from tests.support.scenario import REPO, TEMPLATES, ScenarioHost
from tests.wait_harness import Readings, run_waits

PROFILES = """
profiles:
  - name: lab-tp2-2node
    pins: {sglang: "0.5.23", transformers: "5.19.0", flashinfer: "0.7.2", torch: "2.14.1", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 1
    tp_size: 2
    flags: {--quantization: modelopt_fp4, --served-model-name: glm-5}
    multinode: {nnodes: 2, dist_init_port: 20000, nccl_port: 20010, socket_ifname: lo, dist_timeout: 120}
  - name: lab-tp1
    pins: {sglang: "0.5.23", transformers: "5.19.0", flashinfer: "0.7.2", torch: "2.14.1", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 1
    tp_size: 1
    flags: {--quantization: modelopt_fp4}
"""

INV = """\
vars:
  sglang_profile_dirs: [PROFILES]
nodes:
  pve1:
    address: 127.0.0.1
    containers:
      200:
        serve: {profile: lab-tp2-2node, model: /srv/m, host: 10.0.0.11, port: 30000}
      201:
        serve: {profile: lab-tp1, model: /srv/m, host: 10.0.0.11, port: 30001}
  pve2:
    address: 127.0.0.2
    containers:
      200:
        serve: {profile: lab-tp2-2node, model: /srv/m, host: 10.0.0.12, port: 30000}
serving:
  groups:
    big:
      replicas:
        - members:
            - {node: pve1, ctid: 200}
            - {node: pve2, ctid: 200}
"""


@pytest.fixture
def inventory(tmp_path: Path) -> Callable[..., Path]:
    (tmp_path / "profiles.yml").write_text(PROFILES)

    def write(old: str = "", new: str = "") -> Path:
        path = tmp_path / "inventory.yml"
        path.write_text(INV.replace("PROFILES", str(tmp_path / "profiles.yml")).replace(old, new))
        return path

    return write


def vars_of(path: Path, node: str, stage: str, **extra: Any) -> SglangVars:
    inv = load_inventory(path)
    raw = {
        **inv.vars,
        "containers": {c: s.model_dump() for c, s in inv.nodes[node].containers.items()},
        "serving": serving_vars(inv),
        "inventory_hostname": node,
        "sglang_stage": stage,
        **extra,
    }
    return SglangVars.model_validate(raw)


def after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_every_member_renders_the_same_command_but_its_rank(inventory: Callable[..., Path]) -> None:
    path = inventory()
    argvs = []
    for node, rank in (("pve1", 0), ("pve2", 1)):
        v = vars_of(path, node, "prepare")
        member = v.member(node, 200)
        assert member is not None and member.rank == rank and member.rank0 == "pve1/CT 200"
        launch = Launch(200, v.selected()[200], v, member)
        a = launch.argv
        assert after(a, "--nnodes") == "2" and after(a, "--node-rank") == str(rank)
        assert after(a, "--dist-init-addr") == "10.0.0.11:20000"  # rank 0's address on every node
        assert after(a, "--tp-size") == "2" and after(a, "--dist-timeout") == "120"
        assert launch.env["NCCL_SOCKET_IFNAME"] == launch.env["GLOO_SOCKET_IFNAME"] == "lo"
        argvs.append(a)
    diff = [(x, y) for x, y in zip(*argvs, strict=True) if x != y]
    assert diff == [("10.0.0.11", "10.0.0.12"), ("0", "1")]  # its own --host, its own --node-rank


def _plan(path: Path, book: str) -> list[tuple[str, str, str]]:
    """(play, node, task) in the order the runner works through them: play after play, each node's tasks in order."""
    inv = load_inventory(path)
    playbook = load_playbook(REPO / "playbooks" / book)
    templates = Templates([TEMPLATES])
    out = []
    for pp in prepare(playbook, inv, limit=None, extra=Layer({}, {}), templates=templates):
        for node, hp in pp.hosts.items():
            for rr in hp.roles:
                host = ScenarioHost({}, name=node, vars=hp.vars)
                out += [(pp.play.name, node, t.name) for t in rr.role.tasks(host, rr.vars)]
    return out


def test_the_launch_starts_rank_0_then_the_followers_and_proves_rank_0_alone(inventory: Callable[..., Path]) -> None:
    steps = _plan(inventory(), "launch-sglang.yml")
    plays = list(dict.fromkeys(p for p, _, _ in steps))
    assert len(plays) == 4

    def where(node: str, words: str) -> list[int]:
        return [i for i, (_, n, t) in enumerate(steps) if n == node and t.startswith("CT 200") and words in t]

    (start0,) = where("pve1", "server running profile lab-tp2-2node (rank 0 of 2)")
    (listen0,) = where("pve1", "hosts the rendezvous on 10.0.0.11:20000")
    (answer1,) = where("pve2", "rank 0 (pve1/CT 200) answers on 10.0.0.11:20000")
    (start1,) = where("pve2", "server running profile lab-tp2-2node (rank 1 of 2)")
    (ready0,) = where("pve1", "ready (http://10.0.0.11:30000/health)")
    assert max(where("pve1", "venv") + where("pve2", "venv")) < start0 < listen0 < answer1 < start1 < ready0
    assert steps[start0][0] == plays[1] and steps[start1][0] == plays[2] and steps[ready0][0] == plays[3]
    assert not where("pve2", "ready") and not where("pve2", "serves correctly")  # never judged on a follower
    assert where("pve1", "serves correctly")[0] > ready0
    one_node = [t for p, n, t in steps if t.startswith("CT 201")]  # the one-node server: everything in the last play
    assert {p for p, _, t in steps if t.startswith("CT 201")} == {plays[3]}
    assert one_node[-2:] == ["CT 201: ready (http://10.0.0.11:30001/health)", one_node[-1]]


def test_the_stages_hand_each_member_its_operations(inventory: Callable[..., Path]) -> None:
    path = inventory()

    def ops(node: str, stage: str) -> list[Any]:
        v = vars_of(path, node, stage)
        tasks = container_tasks(ScenarioHost({}, name=node), 200, v.selected()[200], v, v.member(node, 200))
        return [t.operation.args.operation for t in tasks if isinstance(t.operation, InCt)]

    service0, listen0 = ops("pve1", "rank0")
    assert isinstance(service0, SglangService) and isinstance(listen0, SglangRendezvous)
    assert service0.args.launched["multinode"] == {"rank": 0, "nnodes": 2, "rank0": "pve1/CT 200", "group": "big"}
    assert listen0.args.config_sha256 == service0.args.config_sha256  # this start's rendezvous, not an older one's
    answer1, service1 = ops("pve2", "followers")
    assert isinstance(answer1, SglangRendezvous) and answer1.args.config_sha256 is None
    assert (answer1.args.host, answer1.args.port) == ("10.0.0.11", 20000) and isinstance(service1, SglangService)
    ready, verify = ops("pve1", "serve")
    assert isinstance(ready, SglangReady) and isinstance(verify, SglangVerify)
    assert ready.args.url == "http://10.0.0.11:30000" and "pve2/CT 200" in ready.args.note
    assert ops("pve2", "serve") == [] and ops("pve2", "rank0") == [] and ops("pve1", "followers") == []


def test_a_change_to_one_member_restarts_the_whole_replica(inventory: Callable[..., Path]) -> None:
    def config(path: Path) -> str:
        v = vars_of(path, "pve1", "rank0")
        (service, _) = container_tasks(ScenarioHost({}), 200, v.selected()[200], v, v.member("pve1", 200))
        return str(service.operation.args.operation.args.config_sha256)  # type: ignore[attr-defined]

    before = config(inventory())
    after_ = config(inventory("host: 10.0.0.12, port: 30000", "host: 10.0.0.12, port: 30002"))  # the follower's
    assert before != after_


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("nnodes: 2,", "nnodes: 3,", "profile lab-tp2-2node has multinode.nnodes 3, the replica has 2 members"),
        (
            "    multinode: {nnodes: 2, dist_init_port: 20000, nccl_port: 20010, socket_ifname: lo, dist_timeout: 120}\n",
            "",
            "profile lab-tp2-2node serves on one node (no multinode:); a replica over 2 nodes",
        ),
    ],
)
def test_a_profile_that_does_not_span_the_members_is_refused(
    inventory: Callable[..., Path], old: str, new: str, words: str
) -> None:
    path = inventory()
    profiles = path.parent / "profiles.yml"
    profiles.write_text(PROFILES.replace(old, new))
    with pytest.raises(ValidationError) as err:
        vars_of(path, "pve2", "prepare")
    assert "serving.big.replicas.0.members: " + words in str(err.value)


def test_a_spanning_profile_outside_a_replica_and_a_member_outside_the_stages_are_refused(
    inventory: Callable[..., Path],
) -> None:
    path = inventory()
    with pytest.raises(ValidationError, match="sglang_stage: CT 200 on pve2 is rank 1 of the multi-node replica"):
        vars_of(path, "pve2", "all")  # a playbook of its own would start it in no order
    members = path.read_text()
    path.write_text(
        members.replace("- {node: pve2, ctid: 200}", "- {node: pve2, ctid: 202}").replace(
            "      200:\n        serve: {profile: lab-tp2-2node, model: /srv/m, host: 10.0.0.12",
            "      202:\n        serve: {profile: lab-tp2-2node, model: /srv/m, host: 10.0.0.12",
        )
    )
    with pytest.raises(ValidationError, match="launched with all its members: add --ctid for CT 202 on pve2"):
        vars_of(path, "pve1", "prepare", lxc_ctids=[200])  # --ctid 200 would start rank 0 without its follower
    path.write_text(members.split("serving:")[0])  # no replica lists the containers
    with pytest.raises(ValidationError) as err:
        vars_of(path, "pve2", "serve")
    assert "containers.200.serve.profile: profile lab-tp2-2node spans 2 nodes" in str(err.value)


TOKEN = "a" * 32
START = f"gpuhost-sglang: start {TOKEN} profile=p argv-sha256=x"


def watch(lines: list[str], active: str = "active", open_: bool = False) -> RendezvousWatch:
    journal = "\n".join(["old start", START, *lines])
    return RendezvousWatch(journal, active, Reach(open_, None if open_ else "refused"), TOKEN)


def test_rank_0_is_waited_for_until_it_listens_and_a_crash_fails_fast() -> None:
    state = ServiceState("active", TOKEN, {"config_sha256": "c1"})
    args = RendezvousArgs(host="10.0.0.11", port=20000, config_sha256="c1", rank0="pve1/CT 200", poll_s=2)
    polls = iter([watch([]), watch(["[TP0] Init torch distributed begin."]), watch([], open_=True)])
    host = Readings({"rank 0's rendezvous": polls}, {"sglang service": state})
    plan = SglangRendezvous(args).plan(host)  # type: ignore[arg-type]
    assert not plan.changes and host.looks == 0  # a wait: nothing is read until the runner polls
    (done,) = run_waits(plan, host)
    assert done.ok and done.message == "pve1/CT 200 hosts the rendezvous on 10.0.0.11:20000" and host.looks == 3
    crash = [
        "[2026-12-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "torch.distributed.DistStoreError: Timed out after 121 seconds waiting for clients. 1/2 clients joined.",
    ]
    host = Readings({"rank 0's rendezvous": iter([watch(crash, "failed")] * 3)}, {"sglang service": state})
    (failed,) = run_waits(SglangRendezvous(args).plan(host), host)  # type: ignore[arg-type]
    assert not failed.ok and "did not meet at rank 0's rendezvous: torch.distributed.DistStoreError" in failed.message
    assert host.looks == 2  # the crash is read once more before it counts, then the wait ends
    stale = ServiceState("active", TOKEN, {"config_sha256": "older"})
    from gpuhost.core.operation import SkipTask

    with pytest.raises(SkipTask, match="older configuration"):
        SglangRendezvous(args).plan(Readings({}, {"sglang service": stale}))  # type: ignore[arg-type]


def test_a_follower_is_not_started_when_rank_0_does_not_answer() -> None:
    args = RendezvousArgs(host="10.0.0.11", port=20000, rank0="pve1/CT 200", timeout_s=10, poll_s=2)
    host = Readings({"rendezvous port": iter([Reach(False, "connection refused")] * 100)})
    (out,) = run_waits(SglangRendezvous(args).plan(host), host)  # type: ignore[arg-type]
    assert not out.ok and host.looks == 8  # one look at plan time, then at 0, 2, … 12 s (the first past 10 s)
    assert "pve1/CT 200's rendezvous 10.0.0.11:20000 answers from here (connection refused)" in out.message
    assert out.message.startswith("gave up after 10 s waiting until") and "the follower was not started" in out.message
    ok = SglangRendezvous(args).plan(Readings({"rendezvous port": iter([Reach(True, None)])}))  # type: ignore[arg-type]
    assert not ok.changes and not ok.waits and "answers from here" in ok.reason


def test_the_staged_playbook_refuses_a_profile_error_at_its_line(inventory: Callable[..., Path]) -> None:
    path = inventory()
    (path.parent / "profiles.yml").write_text(PROFILES.replace("nnodes: 2,", "nnodes: 3,"))
    inv = load_inventory(path)
    with pytest.raises(ConfigError) as err:
        prepare(
            load_playbook(REPO / "playbooks" / "launch-sglang.yml"),
            inv,
            limit=None,
            extra=Layer({}, {}),
            templates=Templates([TEMPLATES]),
        )
    e = err.value
    assert e.file == str(path) and e.line == 20 and e.field == "serving.groups.big.replicas.0.members", str(e)
