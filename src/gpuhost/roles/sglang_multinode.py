"""A container's place in a multi-node replica (``serving.groups.G.replicas[i].members``), and what is refused before
any host is contacted: a replica whose profile does not span as many nodes as it has members, a container whose
profile spans nodes but that is no member of such a replica, and a member outside the staged launch.

The staged launch (``playbooks/launch-sglang*.yml``), each stage one play over every node: ``prepare`` (every
member installed and configured, nothing started), ``rank0`` (rank 0 started and listening on its rendezvous),
``followers`` (each follower started once it reaches that rendezvous), ``serve`` (one-node servers as always, and
each multi-node replica's readiness and proof on rank 0 alone).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from gpuhost.core.operation import Operation
from gpuhost.core.task import Task, task
from gpuhost.errors import ConfigError
from gpuhost.operations.sglang_multinode import RendezvousArgs, SglangRendezvous
from gpuhost.roles.gateway import FleetGroup, FleetReplica

if TYPE_CHECKING:
    from gpuhost.serve.profile import Profile

Stage = Literal["all", "prepare", "rank0", "followers", "serve"]
#: seconds a follower waits for rank 0's rendezvous to answer (rank 0 was seen listening in the stage before)
FOLLOWER_REACH_S = 30.0


@dataclass(frozen=True)
class Member:
    """One container of a multi-node replica: the replica and its rank there."""

    group: str
    index: int
    replica: FleetReplica
    rank: int

    @property
    def nnodes(self) -> int:
        return len(self.replica.members)

    def name(self, rank: int) -> str:
        m = self.replica.members[rank]
        return f"{m.node}/CT {m.ctid}"

    @property
    def rank0(self) -> str:
        return self.name(0)

    @property
    def followers(self) -> list[str]:
        return [self.name(r) for r in range(1, self.nnodes)]

    @property
    def dist_host(self) -> str:
        assert self.replica.dist_init_host is not None  # the loader resolves it for every multi-node replica
        return self.replica.dist_init_host

    def token(self) -> str:
        """One hash over what every member serves: a change to any member restarts the whole replica."""
        doc = {"members": [m.model_dump() for m in self.replica.members], "dist": self.replica.dist_init_host}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def multinode_replicas(serving: Mapping[str, FleetGroup], group: str | None) -> list[tuple[str, int, FleetReplica]]:
    groups = {group: serving[group]} if group is not None else dict(serving)
    return [(g, i, r) for g, sg in groups.items() for i, r in enumerate(sg.replicas) if r.members]


def member_of(serving: Mapping[str, FleetGroup], group: str | None, node: str, ctid: int) -> Member | None:
    for g, i, r in multinode_replicas(serving, group):
        rank = r.rank_of(node, ctid)
        if rank is not None:
            return Member(g, i, r, rank)
    return None


def check_replicas(serving: Mapping[str, FleetGroup], group: str | None, profile_of: Callable[[str], Profile]) -> None:
    """Each multi-node replica's profile spans exactly its members (multinode.nnodes); raises ``ValueError`` naming
    the replica's members in the inventory."""
    for g, i, r in multinode_replicas(serving, group):
        where = f"serving.{g}.replicas.{i}.members"
        try:
            profile = profile_of(r.profile)
        except ConfigError as exc:
            raise ValueError(f"{where}: {exc.message}") from None
        n = len(r.members)
        if profile.multinode is None:
            raise ValueError(
                f"{where}: profile {profile.name} serves on one node (no multinode:); a replica over {n} nodes "
                f"needs a profile with multinode.nnodes {n}"
            )
        if profile.multinode.nnodes != n:
            raise ValueError(
                f"{where}: profile {profile.name} has multinode.nnodes {profile.multinode.nnodes}, the replica has "
                f"{n} members"
            )


def check_container(
    node: str, ctid: int, profile: Profile, member: Member | None, stage: Stage, ctids: list[int] | None
) -> None:
    """A container whose profile spans nodes is a member of a multi-node replica, launched by the staged playbook
    with all its members (``--ctid`` names every member's container)."""
    if member is not None and ctids:
        left = [f"CT {m.ctid} on {m.node}" for m in member.replica.members if m.ctid not in ctids]
        if left:
            raise ValueError(
                f"lxc_ctids: CT {ctid} on {node} is rank {member.rank} of the multi-node replica "
                f"serving.{member.group}.replicas.{member.index}, launched with all its members: add --ctid for "
                f"{', '.join(left)}"
            )
    if profile.multinode is not None and member is None:
        raise ValueError(
            f"containers.{ctid}.serve.profile: profile {profile.name} spans {profile.multinode.nnodes} nodes "
            f"(multinode:) but CT {ctid} on {node} is no member of a replica over several nodes: list its containers "
            "as members: of a replica under serving.groups, rank 0 first"
        )
    if member is not None and stage == "all":
        raise ValueError(
            f"sglang_stage: CT {ctid} on {node} is rank {member.rank} of the multi-node replica "
            f"serving.{member.group}.replicas.{member.index}: it is launched in stages (rank 0 first, then the "
            "followers): gpuhost launch sglang, or playbooks/launch-sglang.yml"
        )


def rendezvous_task(
    m: Member,
    profile: Profile,
    ct: str,
    config: str,
    timeout_s: float,
    poll_s: float,
    inside: Callable[[Operation[Any]], Operation[Any]],
) -> Task:
    """Rank 0: this start listens on its rendezvous port (``config``: a stale start never counts). A follower: rank
    0's rendezvous answers from its container (a short wait: rank 0 was seen listening in the stage before)."""
    mn = profile.multinode
    assert mn is not None  # checked with the variables: a replica's profile spans its members
    where = f"{m.dist_host}:{mn.dist_init_port}"
    rank0 = m.rank == 0
    args = RendezvousArgs(
        host=m.dist_host,
        port=mn.dist_init_port,
        config_sha256=config if rank0 else None,
        rank0=m.rank0,
        timeout_s=timeout_s if rank0 else FOLLOWER_REACH_S,
        poll_s=poll_s,
        subject=f"{ct} sglang",
    )
    name = f"{ct}: hosts the rendezvous on {where}" if rank0 else f"{ct}: rank 0 ({m.rank0}) answers on {where}"
    return task(name, inside(SglangRendezvous(args)))


def staged(
    stage: Stage, m: Member | None, prepare: list[Task], service: Task, proof: list[Task], meet: Task | None
) -> list[Task]:
    """The container's tasks in this stage of the launch. One-node servers: everything, in stage all or serve.
    A multi-node member: installed and configured (prepare); rank 0 started, then listening (rank0); a follower
    started once rank 0 answers (followers); readiness and proof on rank 0 only (serve)."""
    if m is None:
        return [*prepare, service, *proof] if stage in ("all", "serve") else []
    assert meet is not None
    if stage == "prepare":
        return prepare
    if stage == "rank0" and m.rank == 0:
        return [service, meet]
    if stage == "followers" and m.rank > 0:
        return [meet, service]
    if stage == "serve" and m.rank == 0:
        return proof
    return []
