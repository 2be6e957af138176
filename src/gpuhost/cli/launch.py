"""``gpuhost launch sglang``: the built-in launch playbook with the shared run flags."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuhost.cli.flags import Preset, RunFlags, run_flags
from gpuhost.cli.playbook_run import InventoryOpt, run_with_flags
from gpuhost.cli.root import app

launch_app = typer.Typer(help="Launch LLM servers in the inventory's GPU guests.", no_args_is_help=True)
app.add_typer(launch_app, name="launch")


@launch_app.command("sglang")
@run_flags(  # type: ignore[untyped-decorator]
    without=("allow_reboot", "reboot_serving"),
    helps={
        "allow_restart": "Restart a running SGLang server (or gateway) whose configuration changed; without it the "
        "change is installed and the running server is left as it is."
    },
)
def launch_sglang(
    inventory: Path = InventoryOpt,
    ctid: list[int] = typer.Option([], "--ctid", help="Only this container (repeat for more)."),
    profile: str | None = typer.Option(None, "--profile", help="Launch this profile instead of serve.profile."),
    group: str | None = typer.Option(
        None, "--group", help="A serving group (serving.groups): its replicas in parallel, then its gateway (smg)."
    ),
    prove: bool = typer.Option(
        False,
        "--prove",
        help="The full proof (smoke, canary, logprobs, speed) even for a server it passed on since its start; "
        "without it a converged re-run asks /health and /server_info.",
    ),
    *,
    flags: RunFlags,
) -> None:
    """Validate, install, start and prove SGLang in each container with a serve: entry.

    With --group, the group's replicas are launched in parallel on their nodes, then its gateway (the SGLang Model
    Gateway, smg), if it has one, is installed and started on its node and made to route to exactly those replicas.
    A replica over several nodes (members:) starts rank 0 first, then its followers once rank 0 listens on its
    rendezvous; its readiness and proof come from rank 0 alone, and the gateway gets rank 0's URL.
    A running server or gateway with a changed configuration is restarted only with --allow-restart. A server is
    proven in full (smoke, canary, logprobs, speed) once per start; a converged re-run asks /health and /server_info
    of a start already proven, unless --prove.
    Exit 0 when every server is ready and answers correctly, 1 when one fails, 2 on bad input (nothing changed).
    """
    from gpuhost.cli.provision import _builtin

    if not group:
        _require_serve_entries(inventory, flags.limit, ctid)
    presets = [
        Preset(var, value, flag)
        for var, value, flag in (
            ("lxc_ctids", ctid, "--ctid"),
            ("sglang_profile", profile, "--profile"),
            ("sglang_group", group, "--group"),
            ("sglang_prove", prove, "--prove"),
        )
        if value
    ]
    book = "launch-sglang-group.yml" if group else "launch-sglang.yml"
    raise typer.Exit(run_with_flags(_builtin(book), inventory, flags, presets))


def _require_serve_entries(inventory: Path, limit: str | None, ctids: list[int]) -> None:
    """Nothing to launch is bad input (exit 2), not a run of ``0 tasks`` that exits 0."""
    from gpuhost.errors import UsageError
    from gpuhost.inventory.loader import load_inventory

    inv = load_inventory(inventory)
    nodes = inv.select(limit) if limit else list(inv.nodes)
    served = [
        (n, ct) for n in nodes for ct, c in inv.nodes[n].containers.items() if c.serve and (not ctids or ct in ctids)
    ]
    if not served:
        where = f" of --limit {limit}" if limit else ""
        which = f" among --ctid {', '.join(map(str, ctids))}" if ctids else ""
        raise UsageError(
            f"nothing to launch: no container{where}{which} in {inventory} has a serve: entry; add one under "
            "nodes.NAME.containers.CTID.serve (profile, model), see docs/launch-sglang.md"
        )
