"""Facts about systemd units."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpuhost.connection.base import Connection


@dataclass(frozen=True)
class UnitState:
    enabled: str   # 'enabled', 'disabled', 'static', 'masked', 'not-found', …
    active: str    # 'active', 'inactive', 'failed', … or 'unknown' when systemd is not running


def unit_state(conn: Connection, unit: str) -> UnitState:
    u = shlex.quote(unit)
    result = conn.run(f"systemctl is-enabled {u} 2>&1; echo '|'; systemctl is-active {u} 2>/dev/null; true")
    enabled_part, _, active_part = result.stdout.partition("|")
    enabled = enabled_part.strip().splitlines()[-1] if enabled_part.strip() else "unknown"
    if "No such file" in enabled_part or "not-found" in enabled_part:
        enabled = "not-found"
    active = active_part.strip() or "unknown"
    return UnitState(enabled=enabled, active=active)


def systemd_running(conn: Connection) -> bool:
    return conn.run("test -d /run/systemd/system", ok_codes=(0, 1)).exit_code == 0
