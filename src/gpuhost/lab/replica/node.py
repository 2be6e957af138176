"""The replica as a lab node: its NodeSpec, the seed folder of the host's files, and the seed hook that gives
it the bundle's hardware and boots it with what its boot loader files say."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from gpuhost.lab.node import bootloader
from gpuhost.lab.node import paths as node_paths
from gpuhost.lab.node.state import NodeState
from gpuhost.lab.replica.shape import Replica
from gpuhost.lab.spec import NodeSpec, require_loopback


def node_name(replica: Replica) -> str:
    """A lab node name from the captured node's (a host name: letters, digits, hyphens), at most 16 characters:
    the node's control sockets live under a folder named after it (AF_UNIX paths hold 107 bytes)."""
    name = re.sub(r"[^A-Za-z0-9-]", "-", replica.source.split(".")[0]).strip("-")[:16].strip("-")
    return name or "replica"


def node_spec(replica: Replica, address: str, name: str | None = None) -> NodeSpec:
    require_loopback(address)
    return NodeSpec(
        name=name or node_name(replica),
        address=address,
        boot=replica.boot,  # type: ignore[arg-type]
        cpu=replica.cpu,  # type: ignore[arg-type]
        pve=replica.pve,
        gpus=replica.gpus,
        gpu_model=replica.gpu_model,
        numa=int(replica.gpu_plan["numa"]),  # type: ignore[call-overload]
    )


def write_seed(replica: Replica, folder: Path) -> None:
    """The host's files, laid out as a ``--seed`` folder (gpuhost.lab.seed.apply_seed_dir places guest configs)."""
    for rel, data in sorted(replica.seed.items()):
        target = folder / rel
        if not target.resolve().is_relative_to(folder.resolve()):
            continue  # the bundle reader refused such names already; never write outside the folder
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o644)


def hook(replica: Replica) -> Callable[[Path, NodeState], None]:
    """Runs after the lab's GPU hook: the node's GPUs become the bundle's, and the boot loader's generated files
    are refreshed from the seeded sources (what update-grub / proxmox-boot-tool refresh would write: the node
    then boots the host's configured command line)."""

    def apply(upper: Path, state: NodeState) -> None:
        state.extra["gpu"] = replica.gpu_plan
        state.extra["replica_of"] = replica.source
        (upper / node_paths.NODE_STATE.lstrip("/")).write_text(state.to_json())  # as the lab's GPU hook does
        bootloader.write_grub_cfg(upper, state.kernel)
        if state.boot in ("systemd-boot", "grub-pbt"):  # grub-pbt: GRUB's config on each ESP
            bootloader.refresh_esps(upper, state.kernel, grub=state.boot == "grub-pbt")

    return apply
