"""``serial``: a play's hosts in batches, each batch finished before the next starts (rolling changes)."""

from __future__ import annotations


def batches(hosts: list[str], serial: int | None) -> list[list[str]]:
    """``hosts`` in batches of ``serial`` (all in one batch when None)."""
    if not serial or serial >= len(hosts):
        return [list(hosts)] if hosts else []
    return [hosts[i : i + serial] for i in range(0, len(hosts), serial)]
