"""``gpuhost doctor -i INV``: load the inventory, validate what it expects (bad input: exit 2 before any node is
contacted), read every selected node live, and rank."""

from __future__ import annotations

from pathlib import Path

from gpuhost.acceptance.expect import host_vars, lxc_vars
from gpuhost.doctor.gather import Scope, gather
from gpuhost.doctor.report import Report, build_report
from gpuhost.errors import ConfigError
from gpuhost.inventory.loader import load_inventory


def diagnose(
    inventory: Path,
    *,
    limit: str | None = None,
    ctids: tuple[int, ...] = (),
    probe: bool = False,
    bench_dir: Path = Path("gpuhost-bench"),
) -> Report:
    from gpuhost.runner.connect import open_connection

    inv = load_inventory(inventory)
    names = inv.select(limit) if limit else list(inv.nodes)
    for name in names:  # every expectation validated first
        host_vars(inv, name)
        if inv.nodes[name].containers:
            lxc_vars(inv, name, list(ctids) or None)
    if ctids and not any(c in inv.nodes[n].containers for n in names for c in ctids):
        raise ConfigError(f"--ctid {', '.join(map(str, ctids))}: no such container in {inventory}")
    scope = Scope(inv, limit=limit, ctids=ctids, probe=probe, bench_dir=bench_dir)
    observed = gather(scope, str(inventory), open_connection)
    return build_report(observed, str(inventory), scope.trips)
