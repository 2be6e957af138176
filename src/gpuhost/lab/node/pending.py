"""Pending changes, shared by VMs and containers: staging a change, applying what may apply now."""

from __future__ import annotations

from collections.abc import Callable

from gpuhost.pve.config import GuestConfig


def stage(conf: GuestConfig, params: dict[str, str], delete: list[tuple[str, bool]], revert: list[str]) -> None:
    """Write every requested change into the pending section (PVE does this first, always)."""
    for key in revert:
        conf.delete(key, section="pending")
        conf.remove_pending_delete(key)
    for key, force in delete:
        conf.delete(key, section="pending")
        if conf.get(key) is not None:
            conf.add_pending_delete(key, force)
    for key, value in params.items():
        conf.set(key, value, section="pending")
        conf.remove_pending_delete(key)
    _drop_unchanged(conf)


def _drop_unchanged(conf: GuestConfig) -> None:
    pending = conf.pending
    if pending is None:
        return
    for key, value in list(pending.options.items()):
        if key != "delete" and conf.get(key) == value:
            conf.delete(key, section="pending")
    if pending.description is not None and pending.description == conf.main.description:
        conf.delete("description", section="pending")


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
