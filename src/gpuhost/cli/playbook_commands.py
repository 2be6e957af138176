"""``gpuhost run`` and ``gpuhost facts``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuhost.cli.flags import RunFlags, run_flags
from gpuhost.cli.root import app
from gpuhost.errors import UsageError

InventoryOpt = typer.Option(
    ..., "-i", "--inventory", help="Inventory file (YAML).", exists=False, envvar="GPUHOST_INVENTORY", metavar="FILE"
)
VerboseOpt = typer.Option(False, "--verbose", "-v", help="Show each remote command and its timing.")


def parse_extra_vars(pairs: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``-e KEY=VALUE`` pairs and ``-e @vars.yml`` files → values and their origins.

    A pair's errors name ``-e:N``; a file's name the file, the line and the key.
    """
    from gpuhost.errors import ConfigError
    from gpuhost.playbook.variables import Origin
    from gpuhost.yamlfile import parse_scalar

    out: dict[str, Any] = {}
    origins: dict[str, Any] = {}
    for i, pair in enumerate(pairs, start=1):
        if pair.startswith("@"):
            values, where = _vars_file(Path(pair[1:]))
            out.update(values)
            origins.update(where)
            continue
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key or not key.isidentifier():
            raise ConfigError(
                "expects KEY=VALUE with KEY a variable name, or @FILE",
                file="-e",
                line=i,
                field=pair.split("=", 1)[0][:40] or None,
            )
        out[key] = parse_scalar(value)
        origins[key] = Origin("-e", line_no=i)
    return out, origins


def _vars_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A YAML mapping of variables; its keys keep their lines for every later error."""
    from gpuhost import yamlfile
    from gpuhost.errors import ConfigError
    from gpuhost.playbook.variables import Origin

    doc = yamlfile.load(path)
    if doc is None:
        return {}, {}
    if not isinstance(doc, dict):
        raise ConfigError("a vars file holds a mapping of variable names to values", file=str(path), line=1)
    for key in doc:
        if not isinstance(key, str) or not key.isidentifier():
            raise ConfigError(
                "is not a variable name", file=str(path), line=yamlfile.line_of(doc, [key]), field=str(key)[:40]
            )
    values = {k: yamlfile.plain(v) for k, v in doc.items()}
    return values, {k: Origin(str(path), doc, (k,)) for k in values}


def run_with_flags(
    playbook: Path,
    inventory: Path,
    flags: RunFlags,
    preset_vars: dict[str, Any] | None = None,
    *,
    record_drift: bool = False,
) -> int:
    """Load, run, print; returns the run's exit code. Errors are raised for the one handler in ``main``."""
    import contextlib
    import sys

    from gpuhost import __version__
    from gpuhost.cli.output import LivePrinter, print_json, print_recap
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.playbook.loader import load_playbook
    from gpuhost.runner.run import RunOptions, run_playbook

    if flags.as_json and flags.json_events:
        raise UsageError("--json and --json-events both print on stdout: pick one")
    if not (flags.as_json or flags.json_events):
        import dataclasses

        from gpuhost.cli.config import output_mode

        mode = output_mode()
        flags = dataclasses.replace(flags, as_json=mode == "json", json_events=mode == "json-events")
    if flags.verbose:
        from gpuhost.cli import verbose

        verbose.enable()
    from gpuhost.playbook.variables import Origin

    inv = load_inventory(inventory)
    book = load_playbook(playbook)
    if flags.limit:
        inv.select(flags.limit)  # unknown names are a usage error before anything runs
    extra, origins = parse_extra_vars(flags.extra_vars)
    preset = preset_vars or {}
    extra_vars = {**preset, **extra}
    extra_origins = {**{k: Origin(f"--{k.removeprefix('lxc_')}") for k in preset}, **origins}
    if flags.list_hosts or flags.list_tasks or flags.list_tags:
        from gpuhost.cli.listing import print_listing

        return print_listing(book, inv, flags, extra_vars, extra_origins)
    printer: Any = None
    events: Any = None
    if flags.json_events:
        from gpuhost.cli.events import EventWriter

        events = EventWriter(sys.stdout)
    elif not flags.as_json:
        printer = LivePrinter(show_diff=flags.diff, check=flags.check, show_stdout=flags.verbose)
    with contextlib.ExitStack() as stack:
        log: Any = None
        if flags.log is not None:
            from gpuhost.cli.runlog import RunLog

            log = stack.enter_context(RunLog(flags.log, check=flags.check))
        from gpuhost.cli.progress import ProgressLines

        progress = stack.enter_context(ProgressLines(log))
        sinks = [progress_done(progress)] + [s for s in (printer, events, log.task if log else None) if s is not None]

        def on_result(result: Any) -> None:
            for sink in sinks:
                sink(result)

        def on_start(hosts: list[str]) -> None:
            if events is not None:
                from gpuhost.cli.events import start_event

                events.write(start_event(str(book.path), hosts, flags.check))
            if log is not None:
                log.line(f"playbook {book.path}, hosts: {', '.join(hosts) or 'none'}")

        opts = RunOptions(
            check=flags.check,
            limit=flags.limit,
            tags=frozenset(flags.tags),
            skip_tags=frozenset(flags.skip_tags),
            forks=flags.forks,
            lock_wait=flags.lock_wait,
            allow_reboot=flags.allow_reboot,
            allow_restart=flags.allow_restart,
            extra_vars=extra_vars,
            extra_origins=extra_origins,
            on_result=on_result,
            on_start=on_start,
            start_at_task=flags.start_at_task,
            serial=flags.serial,
            reboot_serving=frozenset(flags.reboot_serving),
        )
        report = run_playbook(book, inv, opts)
        report.version = __version__
        if record_drift and report.exit_code == 0 and not flags.check:  # the provision commands' baseline
            _record_snapshots(inv, list(report.hosts))
        if log is not None:
            log.recap(report)
    _write_retry(book.path, report)
    if flags.as_json:
        print_json(report.to_json())
    elif events is not None:
        from gpuhost.cli.events import end_event

        events.write(end_event(report))
    else:
        print_recap(report, round_trips=flags.verbose)
    return report.exit_code


def _record_snapshots(inv: Any, nodes: list[str]) -> None:
    """The baseline ``--drift`` compares against: each node's state after a successful provision."""
    from gpuhost.acceptance import backend, drift
    from gpuhost.errors import GpuhostError

    backend.use_inventory(inv)
    try:
        for node in nodes:
            try:
                drift.save(inv, node, drift.take(backend.node_connection(node), list(inv.nodes[node].containers)))
            except GpuhostError as exc:
                from gpuhost.cli.output import error

                error(f"{node}: state snapshot for --drift not recorded: {exc}")
    finally:
        backend.use_inventory(None)


def progress_done(progress: Any) -> Any:
    def done(result: Any) -> None:
        progress.done(result.host)

    return done


def retry_path(playbook: Path) -> Path:
    """``$XDG_STATE_HOME/gpuhost/retry/<playbook>.retry`` (default ``~/.local/state``): never in the
    project, so a failed run leaves nothing in a git checkout."""
    import os

    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gpuhost" / "retry" / playbook.with_suffix(".retry").name


def _write_retry(playbook: Path, report: Any) -> None:
    """After a failed run, the failed hosts (one a line) go to :func:`retry_path`; the recap says where."""
    from gpuhost.cli.output import err_console

    failed = [h for h, s in report.hosts.items() if s.failed or s.unreachable]
    if not failed:
        return
    retry = retry_path(playbook)
    try:
        retry.parent.mkdir(parents=True, exist_ok=True)
        retry.write_text("".join(f"{h}\n" for h in failed), encoding="utf-8")
    except OSError as exc:
        err_console.print(f"could not write the retry list {retry}: {exc.strerror or exc}")
        return
    err_console.print(f"failed hosts written to {retry}: rerun them with --limit @{retry}")


def execute_playbook(
    playbook: Path,
    inventory: Path,
    *,
    check: bool,
    diff: bool,
    limit: str | None,
    tags: list[str],
    skip_tags: list[str],
    forks: int,
    allow_reboot: bool,
    as_json: bool,
    extra_vars: list[str],
    allow_restart: bool = False,
    preset_vars: dict[str, Any] | None = None,
    verbose: bool = False,
) -> int:
    """Keyword form of :func:`run_with_flags`, for callers that do not hold a :class:`RunFlags`."""
    flags = RunFlags(
        check=check,
        diff=diff,
        limit=limit,
        tags=tags,
        skip_tags=skip_tags,
        forks=forks,
        allow_reboot=allow_reboot,
        allow_restart=allow_restart,
        as_json=as_json,
        extra_vars=extra_vars,
        verbose=verbose,
    )
    return run_with_flags(playbook, inventory, flags, preset_vars)


@app.command("run")
@run_flags
def run_command(
    playbook: Path = typer.Argument(..., help="Playbook file (YAML)."),
    inventory: Path = InventoryOpt,
    *,
    flags: RunFlags,
) -> None:
    """Run a playbook against an inventory.

    Example: gpuhost run playbooks/example.yml -i inventory/site.yml --check --diff
    """
    raise typer.Exit(run_with_flags(playbook, inventory, flags))


@app.command("facts")
def facts_command(
    host: str = typer.Argument(..., help="A node of the inventory."),
    inventory: Path = InventoryOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    verbose: bool = VerboseOpt,
) -> None:
    """Show what gpuhost knows about a node.

    Example: gpuhost facts pve1 -i inventory/site.yml
    """
    from rich.text import Text

    from gpuhost.cli.output import console, print_json
    from gpuhost.facts.summary import summary
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.runner.connect import open_connection, read_fact

    if verbose:
        from gpuhost.cli import verbose as verbose_log

        verbose_log.enable()
    inv = load_inventory(inventory)
    if host not in inv.nodes:
        raise UsageError(f"'{host}' is not a node of {inventory}")
    with open_connection(inv.nodes[host]) as conn:
        facts = read_fact(conn, summary)
    if as_json:
        print_json({"host": host, "facts": facts})
        return
    for key, value in facts.items():
        if key == "gpus" and isinstance(value, list):
            console.print(Text(f"{key:<24}", style="bold") + Text(str(len(value))))
            for gpu in value:
                console.print(Text(f"{'':<24}{gpu}"))
            continue
        shown = " ".join(value) if isinstance(value, list) else ("-" if value is None else str(value))
        console.print(Text(f"{key:<24}", style="bold") + Text(shown))
