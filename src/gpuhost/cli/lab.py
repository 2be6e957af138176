"""``gpuhost lab up|down|status``: simulated Proxmox VE nodes on loopback addresses."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import typer

from gpuhost.cli.root import app
from gpuhost.errors import UsageError
from gpuhost.lab.gpu.catalog import DEFAULT_MODEL, model
from gpuhost.lab.layout import DEFAULT_STATE_DIR
from gpuhost.lab.spec import DEFAULT_BASE_ADDRESS, plan_nodes

lab_app = typer.Typer(
    help="Simulated Proxmox VE nodes reachable over real SSH and HTTPS, for rehearsals and tests.",
    no_args_is_help=True,
)
app.add_typer(lab_app, name="lab")

StateDir = typer.Option(DEFAULT_STATE_DIR, "--state-dir", help="Where the lab keeps its state.")


@lab_app.command("up")
def up(
    nodes: int = typer.Option(1, "--nodes", "-n", help="How many nodes to start."),
    boot: str = typer.Option("systemd-boot", "--boot", help="Boot loader of each node: grub, grub-pbt, systemd-boot."),
    cpu: str = typer.Option("amd", "--cpu", help="CPU vendor of every node: amd or intel."),
    pve: int = typer.Option(8, "--pve", help="Proxmox VE major version: 8 or 9."),
    address: str = typer.Option(DEFAULT_BASE_ADDRESS, "--address", help="Address of the first node (127.0.0.0/8)."),
    seed: list[Path] = typer.Option(
        [], "--seed", metavar="DIR", help="Directory copied into every node's root (repeatable)."
    ),
    gpus: int = typer.Option(0, "--gpus", help="Simulated NVIDIA GPUs per node (with drivers to install)."),
    gpu_model: str = typer.Option(DEFAULT_MODEL, "--gpu-model", help="GPU model of every node."),
    numa: int = typer.Option(1, "--numa", help="NUMA nodes (sockets) the GPUs are spread over: 1 or 2."),
    vm: int = typer.Option(
        0, "--vm", help="Seed each GPU node with this VM id holding every GPU as the seeds had it (i440fx)."
    ),
    from_capture: Path = typer.Option(
        None, "--from-capture", help="Start one node built from a 'gpuhost capture' bundle (a replica of that host)."
    ),
    state_dir: Path = StateDir,
) -> None:
    """Start N nodes and write an inventory for them."""
    from gpuhost.lab import manager
    from gpuhost.lab.gpu.topology import plan as topology_plan

    if from_capture is not None:
        shaped = {"--nodes": nodes != 1, "--gpus": gpus != 0, "--vm": vm != 0, "--numa": numa != 1}
        shaped |= {"--boot": boot != "systemd-boot", "--cpu": cpu != "amd", "--pve": pve != 8}
        given = [flag for flag, set_ in shaped.items() if set_]
        if given:
            raise UsageError(f"--from-capture builds the node from the bundle; drop {', '.join(given)}")
        _up_from_capture(from_capture, address, seed, state_dir)
        return
    plan = plan_nodes(nodes, base_address=address, boot=boot, cpu=cpu, pve=pve)
    gpu_model = model(gpu_model).name
    if vm and not gpus:
        raise UsageError("--vm needs --gpus: the VM gets the node's GPUs")
    if vm and not 100 <= vm <= 999_999_999:
        raise UsageError(f"--vm {vm}: PVE's VM ids are 100..999999999")
    if vm == 100:
        raise UsageError("--vm 100: VM 100 is the lab's plain seed VM; pick another id (e.g. 110)")
    plan = [replace(n, gpus=gpus, gpu_model=gpu_model, numa=numa, gpu_vm=vm) for n in plan]
    topology_plan("check", cpu, gpus, model(gpu_model), numa)  # usage errors before anything starts
    for d in seed:
        if not d.is_dir():
            raise UsageError(f"--seed {d}: not a directory")
    started = time.monotonic()
    info = manager.up(plan, state_dir, seed_dirs=seed)
    elapsed = time.monotonic() - started
    guests = sum(1 for n in info.nodes if n.get("guest_of"))
    shown = f"{len(info.nodes) - guests} node(s)" + (f" and {guests} VM guest(s), booted by qm start" if guests else "")
    typer.echo(f"lab up: {shown} in {elapsed:.1f} s")
    _print_nodes(info.nodes)
    typer.echo(f"inventory: {info.inventory}")
    first = info.nodes[0]["address"]
    typer.echo(
        f"ssh: ssh -i {info.state_dir}/client_key -o UserKnownHostsFile={info.state_dir}/known_hosts root@{first}"
    )


def _up_from_capture(bundle_path: Path, address: str, seed: list[Path], state_dir: Path) -> None:
    """``lab up --from-capture``: the bundle is read and checked before anything starts (exit 2 when refused)."""
    import tempfile

    from gpuhost.lab import manager
    from gpuhost.lab.replica import bundle, node, shape

    for d in seed:
        if not d.is_dir():
            raise UsageError(f"--seed {d}: not a directory")
    replica = shape.build(bundle.load(bundle_path))
    spec = node.node_spec(replica, address)
    typer.echo(
        f"replica of {replica.source}: {replica.gpus} GPU(s), {replica.boot}, PVE {replica.pve}, "
        f"{len(replica.seed)} file(s) of the host"
    )
    typer.echo("not reproduced by the lab:")
    for note in replica.not_reproduced:
        typer.echo(f"  - {note}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpuhost-replica-") as tmp:
        node.write_seed(replica, Path(tmp))
        info = manager.up([spec], state_dir, seed_dirs=[Path(tmp), *seed], hooks=[node.hook(replica)])
    typer.echo(f"lab up: 1 node (replica of {replica.source}) in {time.monotonic() - started:.1f} s")
    _print_nodes(info.nodes)
    typer.echo(f"inventory: {info.inventory}")


@lab_app.command("down")
def down(state_dir: Path = StateDir) -> None:
    """Stop every node the lab started and remove its state."""
    from gpuhost.lab import manager

    stopped = manager.down(state_dir)
    typer.echo("lab down: stopped and removed" if stopped else f"lab down: no lab in {state_dir}")


@lab_app.command("status")
def status(
    state_dir: Path = StateDir, as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")
) -> None:
    """List the lab's nodes."""
    from gpuhost.lab import manager

    info = manager.status(state_dir)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "state_dir": str(info.state_dir),
                    "inventory": str(info.inventory),
                    "supervisor_pid": info.supervisor_pid,
                    "nodes": info.nodes,
                },
                sort_keys=True,
            )
        )
        return
    if info.supervisor_pid is None:
        typer.echo(f"lab in {state_dir}: supervisor not running (nodes are down); run gpuhost lab down")
    else:
        typer.echo(f"lab in {state_dir}: supervisor pid {info.supervisor_pid}")
    _print_nodes(info.nodes)
    typer.echo(f"inventory: {info.inventory}")


def _print_nodes(nodes: list[dict[str, object]]) -> None:
    typer.echo(f"{'NODE':<10} {'ADDRESS':<16} {'STATE':<10} {'BOOT':<13} {'CPU':<6} {'PVE':<4} CMDLINE")
    for n in nodes:
        state = "rebooting" if n.get("rebooting") else ("running" if n.get("running") else "stopped")
        typer.echo(
            f"{n['name']!s:<10} {n['address']!s:<16} {state:<10} {n['boot']!s:<13} {n['cpu']!s:<6} "
            f"{n['pve']!s:<4} {n.get('cmdline', '')}"
        )
