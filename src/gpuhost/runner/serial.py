"""``serial``: a play's hosts in batches, each batch finished before the next starts (rolling changes)."""

from __future__ import annotations


def batches(hosts: list[str], serial: int | None) -> list[list[str]]:
    """``hosts`` in batches of ``serial`` (all in one batch when None)."""
    if not serial or serial >= len(hosts):
        return [list(hosts)] if hosts else []
    return [hosts[i : i + serial] for i in range(0, len(hosts), serial)]


def batch_stops(size: int, failed: int, max_fail_percentage: int | None) -> str | None:
    """Why a rolling run stops after a batch of ``size`` hosts of which ``failed`` failed; None when it goes on.

    As Ansible: the play ends when every host of a batch failed (``PlaybookExecutor.run``: "break out if the entire
    batch failed"), or when the failed share exceeds ``max_fail_percentage`` (it must be exceeded, not equalled;
    ``max_fail_percentage: 0`` stops at the first failure; the linear strategy's check on ``batch_size``)."""
    if failed == 0 or size == 0:
        return None
    if failed == size:
        return "every host of the batch failed"
    if max_fail_percentage is not None and failed * 100 > max_fail_percentage * size:
        return f"{failed} of {size} failed, more than --max-fail-percentage {max_fail_percentage}"
    return None
