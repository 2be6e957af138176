"""Tensor parallelism across nodes: the rank-0 and follower commands, the ports the nodes must reach on each other,
the lint of those ports, and the order they start in.

SGLang (0.5.23, ``server_args.py PortArgs.init_new``, ``distributed/bootstrap.py``): every node runs the same
command but its ``--node-rank``; ``--dist-init-addr HOST:PORT`` is rank 0's address and identical everywhere;
ZMQ ports are derived from ``PORT+1 … PORT+6``; NCCL listens on ``--nccl-port`` (random unless pinned). Only rank 0
serves the API: followers answer ``/health`` unconditionally, so readiness is judged on rank 0 alone. Rank 0
hosts the rendezvous store, so it starts first and the followers join it; stopping rank 0 stops the group.
"""

from __future__ import annotations

from gpuhost.checks import Finding, Level, check
from gpuhost.serve.command import LaunchCommand, render
from gpuhost.serve.facts import P2pSummary
from gpuhost.serve.profile import Profile

PORTS_CHECK = "serve.multinode-ports"
#: Linux's default ``net.ipv4.ip_local_port_range``: a listening port inside it can collide with an outgoing one
EPHEMERAL = (32768, 60999)
#: ports after ``--dist-init-addr``'s that SGLang derives its ZMQ sockets from in multi-node mode
ZMQ_BLOCK = 6
#: flags gpuhost renders per rank; a profile must not set them itself
RANK_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr", "--nccl-port", "--dist-timeout")


def _http_port(profile: Profile) -> int:
    port = profile.flags.get("--port")
    return int(str(port)) if port is not None else 30000


def ports(profile: Profile) -> dict[str, list[int]]:
    """What each node must reach on the others (rank 0's rendezvous and ZMQ block, every node's NCCL port) and
    what clients reach on rank 0 (HTTP)."""
    mn = profile.multinode
    if mn is None:
        return {}
    return {
        "dist-init (rank 0)": [mn.dist_init_port],
        "zmq (rank 0)": list(range(mn.dist_init_port + 1, mn.dist_init_port + 1 + ZMQ_BLOCK)),
        "nccl (every node)": [mn.nccl_port],
        "http api (rank 0)": [_http_port(profile)],
    }


def render_rank(profile: Profile, rank: int, rank0_host: str, p2p: P2pSummary | None = None) -> LaunchCommand:
    """The command of node ``rank`` (0 … nnodes-1): the single-node command plus the per-rank flags; the same
    ``--dist-init-addr`` (rank 0's address) on every node."""
    mn = profile.multinode
    if mn is None:
        raise ValueError(f"profile {profile.name} is not a multi-node profile")
    if not 0 <= rank < mn.nnodes:
        raise ValueError(f"node rank {rank} outside 0..{mn.nnodes - 1}")
    cmd = render(profile, p2p)
    host = f"[{rank0_host}]" if ":" in rank0_host else rank0_host
    argv = [
        *cmd.argv,
        "--nnodes",
        str(mn.nnodes),
        "--node-rank",
        str(rank),
        "--dist-init-addr",
        f"{host}:{mn.dist_init_port}",
        "--nccl-port",
        str(mn.nccl_port),
        "--dist-timeout",
        str(mn.dist_timeout),
    ]
    env = dict(cmd.env)
    if mn.socket_ifname:
        env.setdefault("NCCL_SOCKET_IFNAME", mn.socket_ifname)
        env.setdefault("GLOO_SOCKET_IFNAME", mn.socket_ifname)
    return LaunchCommand(argv=argv, env=env)


def start_order(nnodes: int) -> list[int]:
    """Rank 0 first (it hosts the rendezvous store and is the one readiness is judged on), then the followers."""
    return list(range(nnodes))


@check(
    PORTS_CHECK,
    title="Multi-node ports and sizes are consistent",
    group="serve",
    meaning="A multi-node profile whose sizes do not split over its nodes, or whose ports collide with each "
    "other, with the HTTP port, or with the ephemeral range, fails at start or hangs in NCCL/rendezvous.",
    fix="Pick dist_init_port / nccl_port below 32768 and apart; tp_size = nnodes x gpus.",
)
def check_multinode(profile: Profile) -> list[Finding]:
    mn = profile.multinode
    if mn is None:
        return []
    subject = f"profile {profile.name}"
    out: list[Finding] = []

    def fail(msg: str, fix: str) -> None:
        out.append(Finding(Level.FAIL, PORTS_CHECK, subject, msg, fix=fix))

    set_by_profile = [f for f in RANK_FLAGS if f in profile.flags]
    if set_by_profile:
        fail(f"{', '.join(set_by_profile)} in flags", "drop them: gpuhost renders them per rank from multinode:")
    if profile.tp_size % mn.nnodes or profile.tp_size // mn.nnodes != profile.gpus:
        fail(
            f"tp_size {profile.tp_size} over {mn.nnodes} nodes is not {profile.gpus} GPUs per node",
            "tp_size = nnodes x gpus (gpus counts one node's GPUs)",
        )
    block = range(mn.dist_init_port, mn.dist_init_port + 1 + ZMQ_BLOCK)
    http = _http_port(profile)
    if mn.nccl_port in block:
        fail(
            f"nccl_port {mn.nccl_port} inside the rendezvous/ZMQ block {block.start}-{block.stop - 1}",
            f"nccl_port outside {block.start}-{block.stop - 1}",
        )
    if http in block or http == mn.nccl_port:
        fail(f"HTTP port {http} collides with the multi-node ports", "move --port or the multinode ports")
    if block.stop - 1 > 65535:
        fail(f"the ZMQ block ends at {block.stop - 1}, beyond 65535", "a lower dist_init_port")
    lo, hi = EPHEMERAL
    inside = [p for p in (*block, mn.nccl_port) if lo <= p <= hi]
    if inside:
        out.append(
            Finding(
                Level.WARN,
                PORTS_CHECK,
                subject,
                f"ports {inside[0]}…{inside[-1]} in Linux's ephemeral range {lo}-{hi}",
                "an outgoing connection can hold the port when the server binds it",
                "ports below 32768",
            )
        )
    if not mn.socket_ifname:
        out.append(
            Finding(
                Level.WARN,
                PORTS_CHECK,
                subject,
                "no socket_ifname: NCCL and Gloo pick an interface themselves",
                "a wrong pick (docker0, a management NIC) hangs or slows the all-reduce",
                "multinode.socket_ifname: the interface between the nodes",
            )
        )
    if not out:
        opened = ", ".join(f"{k} {v[0]}" + (f"-{v[-1]}" if len(v) > 1 else "") for k, v in ports(profile).items())
        out.append(Finding(Level.PASS, PORTS_CHECK, subject, f"{mn.nnodes} nodes; open between them: {opened}"))
    return out
