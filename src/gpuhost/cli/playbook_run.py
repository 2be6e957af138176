"""Running a playbook from the command line, shared by ``gpuhost run``, ``provision`` and ``launch``: the
``-e`` variables and the presets, the output mode, the sinks each result goes to, the retry list."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpuhost.cli.flags import Preset, RunFlags
from gpuhost.errors import InventoryError, UsageError

if TYPE_CHECKING:
    from gpuhost.inventory.loader import Inventory
    from gpuhost.runner.early import EarlyReads

InventoryOpt = typer.Option(
    ..., "-i", "--inventory", help="Inventory file (YAML).", exists=False, envvar="GPUHOST_INVENTORY", metavar="FILE"
)
VerboseOpt = typer.Option(False, "--verbose", "-v", help="Show each remote command and its timing.")


def parse_extra_vars(pairs: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``-e KEY=VALUE`` pairs, ``-e '{"KEY": …}'`` JSON mappings and ``-e @vars.yml`` files → values and origins.

    As in Ansible, ``KEY=VALUE`` keeps VALUE a string (``0644`` stays ``"0644"``, ``true`` stays ``"true"``;
    a typed variable converts it as the inventory's would); typed values come from a JSON mapping or a file.
    A pair's errors name ``-e:N``; a file's name the file, the line and the key.
    """
    from gpuhost.errors import ConfigError
    from gpuhost.playbook.variables import Origin

    out: dict[str, Any] = {}
    origins: dict[str, Any] = {}
    for i, pair in enumerate(pairs, start=1):
        if pair.startswith("@"):
            values, where = _vars_file(Path(pair[1:]))
            out.update(values)
            origins.update(where)
            continue
        if pair.lstrip().startswith("{"):
            values = _json_mapping(pair, i)
            out.update(values)
            origins.update({k: Origin("-e", line_no=i) for k in values})
            continue
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key or not key.isidentifier():
            raise ConfigError(
                "expects KEY=VALUE with KEY a variable name, a JSON mapping, or @FILE",
                file="-e",
                line=i,
                field=pair.split("=", 1)[0][:40] or None,
            )
        out[key] = value
        origins[key] = Origin("-e", line_no=i)
    return out, origins


def _json_mapping(text: str, i: int) -> dict[str, Any]:
    """``-e '{"gpu_path": "vm", "lxc_ctids": [200]}'``: typed values, as Ansible takes them."""
    import json

    from gpuhost.errors import ConfigError

    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"is not a JSON mapping: {exc}", file="-e", line=i) from None
    if not isinstance(doc, dict):
        raise ConfigError("a JSON value of -e must be a mapping of variable names to values", file="-e", line=i)
    for key in doc:
        if not key.isidentifier():
            raise ConfigError("is not a variable name", file="-e", line=i, field=key[:40])
    return doc


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
    presets: Sequence[Preset] = (),
    *,
    record_drift: bool = False,
) -> int:
    """Load, run, print; returns the run's exit code. Errors are raised for the one handler in ``main``."""
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.playbook.loader import load_playbook

    flags = _output_flags(flags)
    if flags.verbose:
        from gpuhost.cli import verbose

        verbose.enable()
    inv = load_inventory(inventory)
    early = _send_early(inv, playbook, flags)
    book = load_playbook(playbook)
    if flags.limit is not None:
        try:
            inv.select(flags.limit)  # unknown names are a usage error before anything runs
        except InventoryError as exc:
            raise UsageError(f"--limit {flags.limit!r}: {exc.message}") from None
    extra_vars, extra_origins = run_variables(flags.extra_vars, presets)
    if flags.list_hosts or flags.list_tasks or flags.list_tags:
        from gpuhost.cli.listing import print_listing

        return print_listing(book, inv, flags, extra_vars, extra_origins)
    return _run_and_report(book, inv, flags, extra_vars, extra_origins, record_drift=record_drift, early=early)


def _send_early(inv: Inventory, playbook: Path, flags: RunFlags) -> EarlyReads | None:
    """The remembered reads of nodes whose connection the keeper holds, sent now (:mod:`gpuhost.runner.early`):
    they run on the nodes while the playbook loads and the roles expand. None when the run only lists."""
    if flags.list_hosts or flags.list_tasks or flags.list_tags:
        return None
    from gpuhost.runner.early import EarlyReads
    from gpuhost.runner.remembered import cache_dir

    early = EarlyReads()
    early.send(inv, playbook, cache_dir(), flags.limit)
    return early


def _output_flags(flags: RunFlags) -> RunFlags:
    """One output mode: ``--json`` and ``--json-events`` exclude each other; neither given, the configured one."""
    import dataclasses

    if flags.as_json and flags.json_events:
        raise UsageError("--json and --json-events both print on stdout: pick one")
    if flags.as_json or flags.json_events:
        return flags
    from gpuhost.cli.config import output_mode

    mode = output_mode()
    return dataclasses.replace(flags, as_json=mode == "json", json_events=mode == "json-events")


def run_variables(pairs: list[str], presets: Sequence[Preset]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The command's presets, then ``-e`` over them; each value keeps where it came from (a preset: its flag)."""
    from gpuhost.playbook.variables import Origin

    extra, origins = parse_extra_vars(pairs)
    values = {**{p.var: p.value for p in presets}, **extra}
    return values, {**{p.var: Origin(p.flag) for p in presets}, **origins}


def _run_and_report(
    book: Any,
    inv: Any,
    flags: RunFlags,
    extra_vars: dict[str, Any],
    extra_origins: dict[str, Any],
    *,
    record_drift: bool,
    early: EarlyReads | None = None,
) -> int:
    import contextlib

    from gpuhost import __version__
    from gpuhost.runner.run import run_playbook

    with contextlib.ExitStack() as stack:
        sinks = _Sinks(stack, book, flags)
        opts = _run_options(flags, extra_vars, extra_origins, sinks)
        opts.early = early
        if record_drift:  # the provision commands' baseline, read by the run itself (read ahead: no extra trip)
            from functools import partial

            from gpuhost.acceptance.drift import snapshot_read

            opts.snapshot = partial(snapshot_read, inv)
        report = run_playbook(book, inv, opts)
        report.version = __version__
        if record_drift and report.exit_code == 0 and not flags.check:
            _record_snapshots(inv, report)
        if sinks.log is not None:
            sinks.log.recap(report)
    _write_retry(book.path, report)
    sinks.finish(report)
    return int(report.exit_code)


class _Sinks:
    """Where each task's result goes while the run lasts: the live printer or the event stream, the progress
    lines and ``--log``; then the recap, the JSON report or the end event."""

    def __init__(self, stack: Any, book: Any, flags: RunFlags) -> None:
        import sys

        from gpuhost.cli.output import LivePrinter
        from gpuhost.cli.progress import ProgressLines

        self.book, self.flags = book, flags
        self.printer: Any = None
        self.events: Any = None
        self.log: Any = None
        if flags.json_events:
            from gpuhost.cli.events import EventWriter

            self.events = EventWriter(sys.stdout)
        elif not flags.as_json:
            self.printer = LivePrinter(show_diff=flags.diff, check=flags.check, show_stdout=flags.verbose)
        if flags.log is not None:
            from gpuhost.cli.runlog import RunLog

            self.log = stack.enter_context(RunLog(flags.log, check=flags.check))
        progress = stack.enter_context(ProgressLines(self.log))
        self.sinks = [progress_done(progress)] + [
            s for s in (self.printer, self.events, self.log.task if self.log else None) if s is not None
        ]

    def on_result(self, result: Any) -> None:
        for sink in self.sinks:
            sink(result)

    def on_start(self, hosts: list[str]) -> None:
        if self.events is not None:
            from gpuhost.cli.events import start_event

            self.events.write(start_event(str(self.book.path), hosts, self.flags.check))
        if self.log is not None:
            self.log.line(f"playbook {self.book.path}, hosts: {', '.join(hosts) or 'none'}")

    def finish(self, report: Any) -> None:
        from gpuhost.cli.output import print_json, print_recap

        if self.flags.as_json:
            print_json(report.to_json())
        elif self.events is not None:
            from gpuhost.cli.events import end_event

            self.events.write(end_event(report))
        else:
            print_recap(report, round_trips=self.flags.verbose)


def _run_options(flags: RunFlags, extra_vars: dict[str, Any], extra_origins: dict[str, Any], sinks: _Sinks) -> Any:
    from gpuhost.runner.remembered import cache_dir
    from gpuhost.runner.run import RunOptions

    return RunOptions(
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
        on_result=sinks.on_result,
        on_start=sinks.on_start,
        start_at_task=flags.start_at_task,
        serial=flags.serial,
        reboot_serving=frozenset(flags.reboot_serving),
        max_fail_percentage=flags.max_fail_percentage,
        remember=cache_dir(),
    )


def _record_snapshots(inv: Any, report: Any) -> None:
    """The baseline ``--drift`` compares against: each node's state after a successful provision (read by the run)."""
    from gpuhost.acceptance import drift
    from gpuhost.cli.output import error

    for node, summary in report.hosts.items():
        if summary.snapshot is None:
            error(f"{node}: state snapshot for --drift not recorded: it could not be read at the end of the run")
        else:
            drift.save(inv, node, summary.snapshot)


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
