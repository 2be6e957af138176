"""Pending changes, shared by VMs and containers: staging a change, applying what may apply now."""

from __future__ import annotations

from collections.abc import Callable

from gpuhost.lab.node.pveconf import GuestConfig


def stage(
    conf: GuestConfig,
    params: dict[str, str],
    delete: list[tuple[str, bool]],
    revert: list[str],
    *,
    delete_drops_pending: bool,
) -> list[str]:
    """Write every requested change into the pending section (PVE does this first, always); returns
    the warnings PVE prints. ``delete_drops_pending``: qemu-server's ``delete`` also drops a pending
    value (API2/Qemu.pm:2290-2302 ``delete $conf->{pending}->{$opt}``); pve-container's only queues the
    deletion and keeps it (LXC/Config.pm:1314-1330 ``update_pct_config``)."""
    warnings = []
    for key in revert:
        conf.delete(key, section="pending")
        conf.remove_pending_delete(key)
    for key, force in delete:
        pending_value = conf.pending.options.get(key) if conf.pending is not None else None
        if conf.get(key) is None and pending_value is None:
            # LXC/Config.pm:1315-1317, API2/Qemu.pm:2298: a warning on stderr, the call goes on
            warnings.append(f"cannot delete '{key}' - not set in current configuration!")
            continue
        if delete_drops_pending:
            conf.delete(key, section="pending")
        if conf.get(key) is not None:
            conf.add_pending_delete(key, force)
    for key, value in params.items():
        conf.set(key, value, section="pending")
        conf.remove_pending_delete(key)
    _drop_unchanged(conf)
    return warnings


def _drop_unchanged(conf: GuestConfig) -> None:
    # AbstractConfig.pm cleanup_pending: "remove pending changes when nothing changed" (a pending value equal
    # to the current one goes; 'delete' is skipped "just to be sure")
    pending = conf.pending
    if pending is None:
        return
    unchanged = [key for key, value in pending.options.items() if key != "delete" and value == conf.get(key)]
    if pending.description is not None and pending.description == conf.main.description:
        unchanged.append("description")
    for key in unchanged:
        conf.delete(key, section="pending")


def apply(conf: GuestConfig, may_apply: Callable[[str], bool] = lambda key: True) -> list[str]:
    """Move pending values/deletions into the main section where ``may_apply(key)``; returns
    the keys applied. With the default every pending change applies (cold start, stopped guest)."""
    pending = conf.pending
    if pending is None:
        return []
    applied = []
    for key, _force in list(conf.pending_deletes().items()):
        if may_apply(key):
            conf.delete(key)
            conf.remove_pending_delete(key)
            applied.append(key)
    pending = conf.pending
    if pending is not None:
        for key, value in list(pending.options.items()):
            if key == "delete" or not may_apply(key):
                continue
            conf.set(key, value)
            conf.delete(key, section="pending")
            applied.append(key)
        pending = conf.pending
        if pending is not None and pending.description is not None and may_apply("description"):
            conf.set("description", pending.description)
            conf.delete("description", section="pending")
            applied.append("description")
    return applied


def view(conf: GuestConfig) -> list[dict[str, object]]:
    """GET .../pending: every key with its current value, pending value and deletion mark."""
    pending = conf.pending
    pend_opts = dict(pending.options) if pending is not None else {}
    pend_opts.pop("delete", None)
    deletes = conf.pending_deletes()
    current = dict(conf.main.options)
    if conf.main.description is not None:
        current["description"] = conf.main.description
    if pending is not None and pending.description is not None:
        pend_opts["description"] = pending.description
    out: list[dict[str, object]] = []
    for key in sorted(set(current) | set(pend_opts) | set(deletes)):
        item: dict[str, object] = {"key": key}
        if key in current:
            item["value"] = current[key]
        if key in pend_opts:
            item["pending"] = pend_opts[key]
        if key in deletes:
            item["delete"] = 2 if deletes[key] else 1
        out.append(item)
    return out


def effective(conf: GuestConfig) -> dict[str, str]:
    """The configuration with pending changes applied (what GET config returns by default)."""
    current = dict(conf.main.options)
    if conf.main.description is not None:
        current["description"] = conf.main.description
    pending = conf.pending
    if pending is not None:
        for key, value in pending.options.items():
            if key != "delete":
                current[key] = value
        if pending.description is not None:
            current["description"] = pending.description
    for key in conf.pending_deletes():
        current.pop(key, None)
    return current


def current(conf: GuestConfig) -> dict[str, str]:
    out = dict(conf.main.options)
    if conf.main.description is not None:
        out["description"] = conf.main.description
    return out
