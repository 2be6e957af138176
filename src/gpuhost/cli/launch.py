"""``gpuhost launch sglang``: the built-in launch playbook with the shared run flags."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuhost.cli.flags import RunFlags, run_flags
from gpuhost.cli.playbook_commands import InventoryOpt, run_with_flags
from gpuhost.cli.root import app

launch_app = typer.Typer(help="Launch LLM servers in the inventory's GPU guests.", no_args_is_help=True)
app.add_typer(launch_app, name="launch")


@launch_app.command("sglang")
@run_flags
def launch_sglang(
    inventory: Path = InventoryOpt,
    ctid: list[int] = typer.Option([], "--ctid", help="Only this container (repeat for more)."),
    profile: str | None = typer.Option(None, "--profile", help="Launch this profile instead of serve.profile."),
    group: str | None = typer.Option(
        None, "--group", help="A serving group (serving.groups): its replicas in parallel, then its gateway (smg)."
    ),
    *,
    flags: RunFlags,
) -> None:
    """Validate, install, start and prove SGLang in each container with a serve: entry.

    With --group, the group's replicas are launched in parallel on their nodes, then its gateway (the SGLang Model
    Gateway, smg), if it has one, is installed and started on its node and made to route to exactly those replicas.
    A replica over several nodes (members:) starts rank 0 first, then its followers once rank 0 listens on its
    rendezvous; its readiness and proof come from rank 0 alone, and the gateway gets rank 0's URL.
    A running server or gateway with a changed configuration is restarted only with --allow-restart.
    Exit 0 when every server is ready and answers correctly, 1 when one fails, 2 on bad input (nothing changed).
    """
    from gpuhost.cli.provision import _builtin

    preset: dict[str, object] = {}
    if ctid:
        preset["lxc_ctids"] = ctid
    if profile:
        preset["sglang_profile"] = profile
    if group:
        preset["sglang_group"] = group
    book = "launch-sglang-group.yml" if group else "launch-sglang.yml"
    raise typer.Exit(run_with_flags(_builtin(book), inventory, flags, preset))
