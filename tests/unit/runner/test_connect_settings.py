"""The inventory's ``ssh:`` timeouts reach the SSH connection (every remote command has a limit)."""

from __future__ import annotations

import pytest

from gpuhost.connection.ssh import SSHConnection
from gpuhost.inventory.models import NodeSpec
from gpuhost.runner import connect


def test_inventory_timeouts_reach_ssh_settings(monkeypatch):
    seen = {}

    def fake_connect(self):  # only the network step is replaced; the settings are built for real
        seen["settings"] = self.settings

    monkeypatch.setattr(SSHConnection, "_connect", fake_connect)
    node = NodeSpec.model_validate(
        {
            "name": "pve1",
            "address": "127.0.0.1",
            "ssh": {"connect_timeout": 3, "command_timeout": 42, "keepalive": 2, "keepalive_count": 4},
        }
    )
    conn = connect.open_connection(node)
    s = seen["settings"]
    assert (s.connect_timeout, s.command_timeout, s.keepalive, s.keepalive_count) == (3, 42, 2, 4)
    assert conn.default_timeout == 42


@pytest.mark.parametrize("field,value", [("command_timeout", 0), ("keepalive", -1), ("keepalive_count", 0)])
def test_inventory_refuses_non_positive_timeouts(field, value):
    with pytest.raises(ValueError, match=field):
        NodeSpec.model_validate({"name": "pve1", "address": "127.0.0.1", "ssh": {field: value}})
