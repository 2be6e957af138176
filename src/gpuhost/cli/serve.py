"""``gpuhost serve status|logs|stop|restart``: operate the launched SGLang servers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from gpuhost.cli.root import app

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuhost.inventory.loader import Inventory
    from gpuhost.serve.service import ServeTarget

serve_app = typer.Typer(help="Operate launched SGLang servers: status, logs, stop, restart.", no_args_is_help=True)
app.add_typer(serve_app, name="serve")

InventoryOpt = typer.Option(
    ..., "-i", "--inventory", help="Inventory file (YAML).", envvar="GPUHOST_INVENTORY", metavar="FILE"
)
LimitOpt = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list).")
CtidOpt = typer.Option([], "--ctid", help="Only this container (repeat for more).")


def _inv(path: Path) -> Inventory:
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
    from gpuhost.cli.config import json_output
    from gpuhost.cli.output import console, print_json
    from gpuhost.runner.connect import open_connection
    from gpuhost.serve.service import status

    rows = status(_inv(inventory), limit=limit, ctids=ctid or None, connect=open_connection)
    if json_output(as_json):
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


def _one(inventory: Path, limit: str | None, ctid: list[int]) -> tuple[Inventory, list[ServeTarget]]:
    from gpuhost.serve.service import targets

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
    from gpuhost.redact import for_terminal
    from gpuhost.runner.connect import open_connection
    from gpuhost.serve.service import logs

    inv, ts = _one(inventory, limit, ctid)
    for t in ts:
        if len(ts) > 1:
            console.print(f"== {t.subject}", markup=False)
        for line in logs(inv, t, whole=whole, lines=lines, connect=open_connection):
            console.print(for_terminal(line), markup=False, highlight=False, soft_wrap=True)


AllOpt = typer.Option(False, "--all", help="Every server of the inventory (without --limit or --ctid).")
LockWaitOpt = typer.Option(
    10.0, "--lock-wait", min=0, help="Seconds to wait for a node another gpuhost run holds.", metavar="SECONDS"
)


def _chosen(
    inventory: Path, limit: str | None, ctid: list[int], every: bool, verb: str
) -> tuple[Inventory, list[ServeTarget]]:
    """The targets the operator named: --limit/--ctid, or --all for every server (never all of them by default)."""
    from gpuhost.errors import UsageError

    if every and (limit or ctid):
        raise UsageError(f"serve {verb}: --all names every server; leave out --limit and --ctid, or --all")
    if not (every or limit or ctid):
        raise UsageError(
            f"serve {verb} acts on running servers: name them with --limit NODE and/or --ctid CTID, "
            "or give --all for every server of the inventory"
        )
    return _one(inventory, limit, ctid)


def _each(inv: Inventory, ts: list[ServeTarget], verb: str, act: Callable[[ServeTarget], str]) -> None:
    """``act`` on each target in turn, going on after one fails; a line per target, then a summary (exit 1
    when one failed)."""
    from gpuhost.cli.output import console, error
    from gpuhost.errors import GpuhostError
    from gpuhost.serve.service import label, whole_replicas

    failed: list[str] = []
    chosen = whole_replicas(inv, ts)
    for t in chosen:
        try:
            console.print(f"{label(inv, t)}: {act(t)}", markup=False)
        except GpuhostError as exc:
            failed.append(t.subject)
            error(f"{label(inv, t)}: not {verb}: {exc}")
    done = len(chosen) - len(failed)
    console.print(
        f"{done} of {len(chosen)} servers {verb}" + (f"; failed: {', '.join(failed)}" if failed else ""), markup=False
    )
    raise typer.Exit(1 if failed else 0)


def _control_command(verb: Literal["stop", "restart"], past: str, doc: str, shown: Callable[[str], str]) -> None:
    """Register ``serve VERB``: the named servers (or --all) each get ``systemctl VERB`` under the node's run lock,
    a line each as ``shown`` words it, then a summary (:func:`_each`)."""

    def command(
        inventory: Path = InventoryOpt,
        limit: str | None = LimitOpt,
        ctid: list[int] = CtidOpt,
        every: bool = AllOpt,
        lock_wait: float = LockWaitOpt,
    ) -> None:
        from gpuhost.runner.connect import open_connection
        from gpuhost.runner.node_lock import held_on
        from gpuhost.serve.service import control

        inv, ts = _chosen(inventory, limit, ctid, every, verb)
        _each(inv, ts, past, lambda t: shown(control(inv, t, verb, open_connection, lock=held_on, lock_wait=lock_wait)))

    command.__name__ = f"{verb}_command"
    command.__doc__ = doc
    serve_app.command(verb)(command)


_control_command(
    "stop",
    "stopped",
    """Stop the servers named by --limit/--ctid, or every one with --all (systemctl stop under the node's run lock;
    SGLang drains, then is killed after the unit's stop timeout).

    A replica over several nodes stops as a whole: rank 0 first (its followers end with it), then each follower.
    Exit 0 when every one stopped, 1 when one could not be stopped (the others still are), 2 on bad input.""",
    lambda said: said,
)
_control_command(
    "restart",
    "restarted",
    """Restart the servers named by --limit/--ctid, or every one with --all (as stop, never all of them by
    default: a restart takes each out of service until it is ready again), each with a new start marker, under the
    node's run lock; gpuhost launch sglang then waits for readiness and proves it.

    A replica over several nodes restarts as a whole: rank 0 first, then each follower (which joins it).
    Exit 0 when every one restarted, 1 when one failed (the others are still restarted), 2 on bad input.""",
    lambda said: f"restarted ({said})",
)
