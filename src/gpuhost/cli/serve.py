"""``gpuhost serve status|logs|stop|restart``: operate the launched SGLang servers."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuhost.cli.root import app

serve_app = typer.Typer(help="Operate launched SGLang servers: status, logs, stop, restart.", no_args_is_help=True)
app.add_typer(serve_app, name="serve")

InventoryOpt = typer.Option(..., "-i", "--inventory", help="Inventory file (YAML).")
LimitOpt = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list).")
CtidOpt = typer.Option([], "--ctid", help="Only this container (repeat for more).")


def _inv(path: Path):  # noqa: ANN202 - Inventory, imported lazily
    from gpuhost.inventory.loader import load_inventory

    return load_inventory(path)


@serve_app.command("status")
def status_command(
    inventory: Path = InventoryOpt,
    limit: str | None = LimitOpt,
    ctid: list[int] = CtidOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON (schema gpuhost.serve-status/1)."),
) -> None:
    """Unit state, /health, profile, uptime and GPU memory in use. Exit 0 when every server is up and healthy."""
    from gpuhost.cli.output import console, print_json
    from gpuhost.runner.serve import status

    rows = status(_inv(inventory), limit=limit, ctids=ctid or None)
    if as_json:
        print_json({"schema": "gpuhost.serve-status/1", "servers": rows})
    else:
        for r in rows:
            if "error" in r:
                console.print(f"{r['target']}: {r['error']}", markup=False)
                continue
            up = f"{r['uptime_s']} s" if r.get("uptime_s") is not None else "-"
            mn = r.get("multinode") or {}
            rank = f" (rank {mn.get('rank')} of {mn.get('nnodes')})" if mn else ""
            if mn.get("rank"):  # a follower's /health answers 200 whatever its group's state
                rank += f", serves no API: its replica answers on rank 0 {mn.get('rank0')}"
            console.print(
                f"{r['target']}{rank}: unit {r['unit']}, "
                f"/health {r['health'] if r['health'] is not None else 'no answer'}, "
                f"profile {r['profile'] or '-'} (SGLang {r['sglang'] or '-'}), model {r['model'] or '-'}, "
                f"{r['url'] or '-'}, up {up}, GPU memory {r['gpu_memory_used_mib']} of "
                f"{r['gpu_memory_total_mib']} MiB on {r['gpus']} GPUs",
                markup=False,
            )
    healthy = all(r.get("unit") == "active" and r.get("health") == 200 for r in rows)
    raise typer.Exit(0 if healthy else 1)


def _one(inventory: Path, limit: str | None, ctid: list[int]):  # noqa: ANN202
    from gpuhost.runner.serve import targets

    inv = _inv(inventory)
    return inv, targets(inv, limit=limit, ctids=ctid or None)


@serve_app.command("logs")
def logs_command(
    inventory: Path = InventoryOpt,
    limit: str | None = LimitOpt,
    ctid: list[int] = CtidOpt,
    whole: bool = typer.Option(False, "--all", help="The whole journal, not only since the current start."),
    lines: int | None = typer.Option(None, "-n", "--lines", min=1, help="Only the last N lines."),
) -> None:
    """The server's journal since its current start (a previous start's lines are not shown)."""
    from gpuhost.cli.output import console
    from gpuhost.runner.serve import logs

    inv, ts = _one(inventory, limit, ctid)
    for t in ts:
        if len(ts) > 1:
            console.print(f"== {t.subject}", markup=False)
        for line in logs(inv, t, whole=whole, lines=lines):
            console.print(line, markup=False, highlight=False, soft_wrap=True)


@serve_app.command("stop")
def stop_command(inventory: Path = InventoryOpt, limit: str | None = LimitOpt, ctid: list[int] = CtidOpt) -> None:
    """Stop the server (systemctl stop; SGLang drains, then is killed after the unit's stop timeout).

    A replica over several nodes stops as a whole: rank 0 first (its followers end with it), then each follower."""
    from gpuhost.cli.output import console
    from gpuhost.runner.serve import label, stop, whole_replicas

    inv, ts = _one(inventory, limit, ctid)
    for t in whole_replicas(inv, ts):
        console.print(f"{label(inv, t)}: {stop(inv, t)}", markup=False)


@serve_app.command("restart")
def restart_command(inventory: Path = InventoryOpt, limit: str | None = LimitOpt, ctid: list[int] = CtidOpt) -> None:
    """Restart the server with a new start marker; gpuhost launch sglang then waits for readiness and proves it.

    A replica over several nodes restarts as a whole: rank 0 first, then each follower (which joins it)."""
    from gpuhost.cli.output import console
    from gpuhost.runner.serve import label, restart, whole_replicas

    inv, ts = _one(inventory, limit, ctid)
    for t in whole_replicas(inv, ts):
        console.print(f"{label(inv, t)}: restarted ({restart(inv, t)})", markup=False)
