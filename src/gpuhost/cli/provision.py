"""``gpuhost provision host``: the built-in provisioning playbooks with the usual run options."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuhost.cli.app import app
from gpuhost.cli.playbook_commands import InventoryOpt, execute_playbook
from gpuhost.cli.output import error
from gpuhost.resources import builtin_playbooks_dir

provision_app = typer.Typer(help="Provision Proxmox VE nodes and their GPU guests.", no_args_is_help=True)
app.add_typer(provision_app, name="provision")


def _builtin(name: str) -> Path:
    base = builtin_playbooks_dir()
    if base is None or not (base / name).is_file():
        error(f"gpuhost's built-in playbook {name} is missing from this installation")
        raise typer.Exit(2)
    return base / name


@provision_app.command("host")
def provision_host(
    inventory: Path = InventoryOpt,
    check: bool = typer.Option(False, "--check", help="Show what would change; change nothing."),
    diff: bool = typer.Option(False, "--diff", help="Show file differences."),
    limit: str | None = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list)."),
    allow_reboot: bool = typer.Option(False, "--allow-reboot", help="Reboot nodes whose kernel must restart."),
    forks: int = typer.Option(10, "--forks", "-f", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.run/1)."),
    extra_vars: list[str] = typer.Option([], "-e", "--extra-vars", help="KEY=VALUE, e.g. -e gpu_path=vm."),
) -> None:
    """IOMMU on the kernel command line, the VM or LXC GPU path, a safe reboot, then proof."""
    raise typer.Exit(execute_playbook(_builtin("provision-host.yml"), inventory, check=check, diff=diff,
                                      limit=limit, tags=[], skip_tags=[], forks=forks, allow_reboot=allow_reboot,
                                      as_json=as_json, extra_vars=extra_vars))


@provision_app.command("lxc")
def provision_lxc(
    inventory: Path = InventoryOpt,
    ctid: list[int] = typer.Option([], "--ctid", help="Only this container (repeat for more)."),
    check: bool = typer.Option(False, "--check", help="Show what would change; change nothing."),
    diff: bool = typer.Option(False, "--diff", help="Show file differences."),
    limit: str | None = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list)."),
    allow_reboot: bool = typer.Option(False, "--allow-reboot", help="Reboot nodes whose kernel must restart."),
    allow_restart: bool = typer.Option(False, "--allow-restart",
                                       help="Restart running containers whose devices changed."),
    forks: int = typer.Option(10, "--forks", "-f", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.run/1)."),
    extra_vars: list[str] = typer.Option([], "-e", "--extra-vars", help="KEY=VALUE."),
) -> None:
    """The host's LXC path, then each GPU container: created, passed through, driver matched, CUDA-ready."""
    preset = {"lxc_ctids": ctid} if ctid else {}
    raise typer.Exit(execute_playbook(_builtin("provision-lxc.yml"), inventory, check=check, diff=diff,
                                      limit=limit, tags=[], skip_tags=[], forks=forks, allow_reboot=allow_reboot,
                                      as_json=as_json, extra_vars=extra_vars, allow_restart=allow_restart,
                                      preset_vars=preset))
