"""``gpuhost provision host|lxc|vm``: the built-in provisioning playbooks with the shared run flags."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuhost.cli.flags import Preset, RunFlags, run_flags
from gpuhost.cli.playbook_run import InventoryOpt, run_with_flags
from gpuhost.cli.root import app
from gpuhost.errors import UsageError

provision_app = typer.Typer(help="Provision Proxmox VE nodes and their GPU guests.", no_args_is_help=True)
app.add_typer(provision_app, name="provision")


def _builtin(name: str) -> Path:
    from gpuhost.resources import builtin_playbooks_dir

    base = builtin_playbooks_dir()
    if base is None or not (base / name).is_file():
        raise UsageError(f"gpuhost's built-in playbook {name} is missing from this installation")
    return base / name


@provision_app.command("host")
@run_flags
def provision_host(inventory: Path = InventoryOpt, *, flags: RunFlags) -> None:
    """IOMMU on the kernel command line, the VM or LXC GPU path, a safe reboot, then proof.

    Example: gpuhost provision host -i inventory/site.yml --check --diff
    """
    raise typer.Exit(run_with_flags(_builtin("provision-host.yml"), inventory, flags, record_drift=True))


@provision_app.command("lxc")
@run_flags
def provision_lxc(
    inventory: Path = InventoryOpt,
    ctid: list[int] = typer.Option([], "--ctid", help="Only this container (repeat for more)."),
    *,
    flags: RunFlags,
) -> None:
    """The host's LXC path, then each GPU container: created, passed through, driver matched, CUDA-ready.

    Example: gpuhost provision lxc -i inventory/site.yml --ctid 200 --allow-reboot --allow-restart
    """
    presets = [Preset("lxc_ctids", ctid, "--ctid")] if ctid else []
    raise typer.Exit(run_with_flags(_builtin("provision-lxc.yml"), inventory, flags, presets, record_drift=True))


@provision_app.command("vm")
@run_flags
def provision_vm(
    inventory: Path = InventoryOpt,
    vmid: list[int] = typer.Option([], "--vmid", help="Only this VM (repeat for more)."),
    *,
    flags: RunFlags,
) -> None:
    """The host's VM path, then each GPU VM: q35, pcie=1 passthrough, GPUDirect cliques, driver and P2P in the guest."""
    presets = [Preset("vm_vmids", vmid, "--vmid")] if vmid else []
    raise typer.Exit(run_with_flags(_builtin("provision-vm.yml"), inventory, flags, presets, record_drift=True))
