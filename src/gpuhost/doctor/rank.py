"""The doctor's ranking: which finding is the cause to fix first.

A finding's place comes from three things, in this order:

1. **A cause before its consequences.** :data:`EXPLAINS` says which check's failure explains which others on the
   same node (tokens in the wrong boot file explain IOMMU off, which explains vfio and P2P off, which explains a
   throughput plateau). A consequence is listed right after the cause that explains it, whatever its own level.
2. **Level**: FAIL before WARN before INFO (PASS is not a finding of the doctor's list).
3. **Stack order** (:data:`STAGES`): host → guest → driver → P2P → serving → throughput, then the order the
   checks ran in.

Everything here is pure: findings in, ranked findings out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuhost.checks.finding import Finding, Level

#: The stack, top to bottom: a stage's findings come before the next stage's at the same level.
STAGES: tuple[str, ...] = ("host", "guest", "driver", "p2p", "serving", "throughput")

#: The stage of a check, by its name (the first rule whose prefix matches).
_STAGE_OF: tuple[tuple[str, str], ...] = (
    ("host.nvidia_module", "driver"),
    ("host.nvidia_uvm", "driver"),
    ("host.persistenced", "driver"),
    ("host.nvidia_api_mismatch", "driver"),
    ("host.gpu_init", "driver"),
    ("host.", "host"),
    ("ct.driver_match", "driver"),
    ("ct.uvm", "driver"),
    ("ct.cuda_init", "driver"),
    ("ct.gpus_listed", "driver"),
    ("ct.", "guest"),
    ("vm.guest_p2p", "p2p"),
    ("vm.guest_driver", "driver"),
    ("vm.guest_persistenced", "driver"),
    ("vm.", "guest"),
    ("serve.speed", "throughput"),
    ("serve.admission-queueing", "throughput"),
    ("serve.", "serving"),
    ("sglang.log.p2p-unavailable", "p2p"),
    ("sglang.log.nvidia-uvm-missing", "driver"),
    ("sglang.log.driver-mismatch", "driver"),
    ("sglang.", "serving"),
    ("bench.", "throughput"),
    ("doctor.p2p", "p2p"),
    ("doctor.bench", "throughput"),
    ("doctor.", "host"),
)

_P2P = ("p2p-status", "p2p-measured", "p2p-latency", "p2p-vs-staged", "vm.guest_p2p", "sglang.log.p2p-unavailable")
_IOMMU = ("host.cmdline_booted", "host.iommu_passthrough", "host.iommu_groups", "host.vfio_bound", "vm.vfio_bound")
_CRASH = ("sglang.log.scheduler-crashed", "sglang.log.python-traceback")
_SERVER_DOWN = ("serve.unit", "serve.health", "serve.smoke", "serve.canary", "serve.logprobs", "serve.server-info")

#: cause check → the checks whose failure it explains (on the same node). Read: "X failing explains Y failing".
EXPLAINS: dict[str, tuple[str, ...]] = {
    # the booted command line lacks the tokens (its cause says why: the wrong boot file, no refresh, no reboot):
    # the IOMMU is off, and everything on top of it. host.cmdline_configured (the next boot) is its sibling, not
    # its consequence: both rank by the table's order, the booted one first.
    "host.cmdline_booted": (*_IOMMU[1:], "vm.running", *_P2P, "bench.not-compute-bound"),
    # no host module: no uvm, no persistence daemon, nothing in the guests
    "host.nvidia_module": (
        "host.nvidia_uvm",
        "host.persistenced",
        "ct.gpus_listed",
        "ct.driver_match",
        "ct.uvm",
        "ct.cuda_init",
        *_SERVER_DOWN,
    ),
    # /dev/nvidia-uvm missing on the host: missing in the containers, cuInit fails, SGLang cannot start
    "host.nvidia_uvm": ("ct.uvm", "ct.device_nodes", "ct.cuda_init", "sglang.log.nvidia-uvm-missing", *_SERVER_DOWN),
    "ct.uvm": ("ct.cuda_init", "sglang.log.nvidia-uvm-missing", *_SERVER_DOWN),
    # a container's userspace upgraded alone: the kernel logs an API mismatch, nvidia-smi and cuInit fail
    "ct.driver_match": (
        "host.nvidia_api_mismatch",
        "ct.gpus_listed",
        "ct.cuda_init",
        "sglang.log.driver-mismatch",
        *_SERVER_DOWN,
    ),
    "ct.running": ("ct.gpus_listed", "ct.driver_match", "ct.uvm", "ct.memlock", "ct.cuda_init", *_SERVER_DOWN),
    # a VM without pcie=1 or its clique lines: the driver reports no P2P between its GPUs
    "vm.pcie": (*_P2P, "bench.not-compute-bound"),
    "vm.cliques": (*_P2P, "bench.not-compute-bound"),
    "vm.q35": ("vm.pcie", *_P2P, "bench.not-compute-bound"),
    "vm.no_kvm_off": ("vm.cliques", *_P2P, "bench.not-compute-bound"),
    # P2P off: all-reduce is staged through host memory, the GPUs wait
    "p2p-status": ("p2p-measured", "p2p-latency", "p2p-vs-staged", "bench.not-compute-bound"),
    "vm.guest_p2p": ("bench.not-compute-bound",),
    # the server crashed on a known signature: the scheduler's death and its traceback follow, it is down, or its
    # answers are wrong
    "sglang.log.nan-in-sampling": (*_CRASH, *_SERVER_DOWN, "bench.failed-requests"),
    "sglang.log.nvidia-uvm-missing": (*_CRASH, *_SERVER_DOWN),
    "sglang.log.driver-mismatch": (*_CRASH, *_SERVER_DOWN),
    # the admission bound is the plateau: the levels above it queue, the GPUs idle
    "bench.admission-bound": ("bench.not-compute-bound", "bench.ttft-explosion"),
    # the server's own log shows requests waiting at that bound: the bench's findings of it follow
    "serve.admission-queueing": ("bench.admission-bound", "bench.not-compute-bound", "bench.ttft-explosion"),
}


def stage_of(check: str) -> str:
    """The stage a check belongs to (a P2P judge's check has no prefix: ``p2p-status``, ``link-width`` …)."""
    for prefix, stage in _STAGE_OF:
        if check.startswith(prefix):
            return stage
    return "p2p" if not check.count(".") else "serving"


def node_of(subject: str) -> str:
    """The node a subject is on: ``pve1/CT 200`` → ``pve1``, ``pve1`` → ``pve1``."""
    return subject.split("/", 1)[0]


@dataclass(frozen=True)
class Ranked:
    """A finding at its place: its stage, and the earlier finding (check and subject) that explains it, if any."""

    finding: Finding
    stage: str
    explained_by: Finding | None = None


def _own_key(i: int, f: Finding) -> tuple[int, int, int]:
    return (-int(f.level), STAGES.index(stage_of(f.check)), i)


def _cause_of(f: Finding, pool: Sequence[Finding]) -> Finding | None:
    """The worst-ranked present cause of ``f`` on its node (``None``: nothing present explains it)."""
    causes = [
        c
        for c in pool
        if c is not f and f.check in EXPLAINS.get(c.check, ()) and node_of(c.subject) == node_of(f.subject)
    ]
    return causes[0] if causes else None


def rank(findings: Sequence[Finding]) -> list[Ranked]:
    """The findings worth acting on (WARN and FAIL; INFO last), ranked as the module's docstring says.

    PASS findings are dropped. A chain (A explains B explains C) keeps A first, then B, then C.
    """
    pool = [f for f in findings if f.level > Level.PASS]
    order = {id(f): i for i, f in enumerate(pool)}
    own = {id(f): _own_key(order[id(f)], f) for f in pool}
    by_own = sorted(pool, key=lambda f: own[id(f)])
    cause = {id(f): _cause_of(f, by_own) for f in pool}

    def key(f: Finding, depth: int = 0) -> tuple[tuple[int, int, int], ...]:
        c = cause[id(f)]
        if c is None or depth > len(pool):  # a cycle of explanations is cut at its first member
            return (own[id(f)],)
        return (*key(c, depth + 1), own[id(f)])

    ranked = sorted(pool, key=key)
    return [Ranked(f, stage_of(f.check), cause[id(f)]) for f in ranked]


def fatal(ranked: Sequence[Ranked]) -> bool:
    """Exit 1: a FAIL finding is in the list."""
    return any(r.finding.level >= Level.FAIL for r in ranked)
