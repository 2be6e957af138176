"""Facts about systemd units."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpuhost.core.facts import Fact, fact
from gpuhost.core.result import CommandResult


@dataclass(frozen=True)
class UnitState:
    enabled: str  # 'enabled', 'disabled', 'static', 'masked', 'not-found', …
    active: str  # 'active', 'inactive', 'failed', … or 'unknown' when systemd is not running


#: wait until systemd finished starting the machine before a unit is judged: right after a reboot SSH answers while
#: boot units still run (``systemctl is-system-running --wait``: returns at once on a running or degraded system,
#: and on one without systemd); bounded, so a boot that hangs gives the unit's state as it is then
AFTER_BOOT = "timeout 300 systemctl is-system-running --wait >/dev/null 2>&1"


def _unit_cmd(unit: str) -> str:
    u = shlex.quote(unit)
    return f"{AFTER_BOOT}; systemctl is-enabled {u} 2>&1; echo '|'; systemctl is-active {u} 2>/dev/null; true"


def _unit_state(result: CommandResult, _unit: str) -> UnitState:
    enabled_part, _, active_part = result.stdout.partition("|")
    enabled = enabled_part.strip().splitlines()[-1] if enabled_part.strip() else "unknown"
    if "No such file" in enabled_part or "not-found" in enabled_part:
        enabled = "not-found"
    active = active_part.strip() or "unknown"
    return UnitState(enabled=enabled, active=active)


unit_state: Fact[UnitState] = Fact("unit state", _unit_cmd, _unit_state)


@fact("systemd running", "test -d /run/systemd/system")
def systemd_running(result: CommandResult) -> bool:
    return result.exit_code == 0
