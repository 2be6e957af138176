"""PVE's HA stack as ``ha-manager status`` shows it: which resources run where, and each node's LRM.

``ha-manager status`` is built in proxmox/pve-ha-manager ``src/PVE/API2/HA/Status.pm`` (``status`` API): service
lines ``"$sid ($node, $state)"``, lrm lines ``"$node ($status, $watchdog, $time)"``. The parser is tested on real
captures (tests/fixtures/cluster/ha-manager-status/, SOURCE.md there names each one's origin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class HaService:
    sid: str  # vm:100, ct:101
    node: str
    state: str  # started, stopped, ignored, …


@dataclass(frozen=True)
class HaStatus:
    quorum_ok: bool
    master: str | None
    lrm: dict[str, str]  # node -> its state (active, idle, maintenance mode, …)
    services: tuple[HaService, ...]

    def on(self, node: str) -> list[HaService]:
        return [s for s in self.services if s.node == node]

    def to_move(self, node: str) -> list[HaService]:
        """The HA resources on ``node`` that its reboot would stop: all but those at rest."""
        return [s for s in self.on(node) if s.state not in AT_REST]


#: states of an HA resource that the node's reboot does not ask the HA stack to move: ``stopped`` and
#: ``disabled`` (nothing runs), ``ignored`` (the resource's requested state: HA leaves it alone; pve-ha-manager
#: ``src/PVE/HA/Tools.pm`` ``get_verbose_service_state``), and ``ignore``: while the HA stack is disarmed in
#: ``ignore`` resource mode (PVE 9.x ``ha-manager crm-command disarm-ha ignore``) every resource is shown so
#: (``src/PVE/API2/HA/Status.pm``, ``$add_service``: "show disarm resource mode instead of internal service
#: state") and the CRM refuses node maintenance ("ignoring maintenance command for node … - HA stack is
#: disarmed", ``src/PVE/HA/Manager.pm``, ``enable-node-maintenance``), so nothing would ever move them away
AT_REST = frozenset({"stopped", "ignored", "ignore", "disabled"})


def parse_ha_status(text: str) -> HaStatus:
    """``ha-manager status``: ``quorum OK``, ``master NODE (active, …)``, ``lrm NODE (STATE, …)`` and
    ``service SID (NODE, STATE)`` lines (PVE 9 adds a ``fencing`` line and the watchdog to each lrm line)."""
    master = re.search(r"^master (\S+) \(", text, re.M)
    lrm = {m[1]: m[2].split(",")[0].strip() for m in re.finditer(r"^lrm (\S+) \((.*)\)\s*$", text, re.M)}
    services = tuple(
        HaService(m[1], m[2].strip(), m[3].strip())
        for m in re.finditer(r"^service (\S+) \(([^,)]+), ([^)]+)\)", text, re.M)
    )
    return HaStatus(bool(re.search(r"^quorum OK\s*$", text, re.M)), master[1] if master else None, lrm, services)
