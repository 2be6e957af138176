"""``gpuhost shell HOSTS -i INV -- CMD``: an ad-hoc command on nodes (or in a container on each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuhost.cli.completion import complete_hosts
from gpuhost.cli.root import app
from gpuhost.errors import UsageError


@app.command("shell")
def shell_command(
    hosts: str = typer.Argument(
        ..., help="Nodes: a name, a group, all, globs, !exclusions, @FILE.", autocompletion=complete_hosts
    ),
    command: list[str] = typer.Argument(..., help="The command, after -- (run by the remote shell)."),
    inventory: Path = typer.Option(
        ..., "-i", "--inventory", help="Inventory file (YAML).", envvar="GPUHOST_INVENTORY", metavar="FILE"
    ),
    ctid: int | None = typer.Option(None, "--ctid", help="Run inside this container on each node (pct exec)."),
    forks: int = typer.Option(10, "--forks", "-f", min=1, help="Hosts worked on at once.", envvar="GPUHOST_FORKS"),
    timeout: float | None = typer.Option(None, "--timeout", min=0.1, help="Seconds before a command is stopped."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with each host's result."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show each remote command and its timing."),
) -> None:
    """Run one command on many nodes at once; each host's output under its name.

    Exit status: 0 when the command exited 0 everywhere, 1 when it failed or could not run on a host.

    Example: gpuhost shell 'pve*,!pve3' -i inventory.yml -- nvidia-smi -L
    """
    import shlex

    from gpuhost.cli.output import print_json
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.runner.adhoc import run_adhoc

    if verbose:
        from gpuhost.cli import verbose as verbose_log

        verbose_log.enable()
    inv = load_inventory(inventory)
    names = inv.select(hosts)
    if not names:
        raise UsageError(f"'{hosts}' selects no node of {inventory}")
    for n in names:
        if inv.nodes[n].connection == "api":
            raise UsageError(f"{n}: connection: api cannot run commands (it has no shell)")
    cmd = command[0] if len(command) == 1 else shlex.join(command)
    results = run_adhoc(
        inv, names, cmd, ctid=ctid, forks=forks, timeout=timeout, on_result=None if as_json else _print_result
    )
    failed = [r for r in results if not r.ok]
    if as_json:
        print_json(
            {
                "schema": "gpuhost.shell/1",
                "command": cmd,
                "ctid": ctid,
                "ok": not failed,
                "hosts": {r.host: r.to_json() for r in results},
            }
        )
    else:
        from gpuhost.cli.output import console

        ok = len(results) - len(failed)
        console.print(
            f"{ok} of {len(results)} hosts ok" + (f"; failed: {', '.join(r.host for r in failed)}" if failed else ""),
            markup=False,
        )
    raise typer.Exit(1 if failed else 0)


def _print_result(r: Any) -> None:
    from gpuhost.cli.output import console
    from gpuhost.redact import for_terminal, redact

    def out(text: str) -> None:
        console.print(for_terminal(text), markup=False)

    if r.error and r.exit_code is None:
        out(
            f"{r.host} | UNREACHABLE | {redact(r.error)}" if r.unreachable else f"{r.host} | FAILED | {redact(r.error)}"
        )
        return
    state = "ok" if r.ok else "FAILED"
    out(f"{r.host} | {state} | rc={r.exit_code} | {r.duration:.2f} s" + (f" | {r.error}" if r.error else ""))
    for line in redact(r.stdout).splitlines():
        out(f"  {line}")
    for line in redact(r.stderr).splitlines():
        out(f"  stderr: {line}")
