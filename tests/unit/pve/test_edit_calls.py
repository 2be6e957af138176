"""A key with a pending value and a current one, wanted absent: PVE refuses ``delete`` and ``revert`` of one
key in one call (pve-container API2/LXC/Config.pm:203-208, qemu-server API2/Qemu.pm:2139-2141), so the
change is two calls: revert, then delete."""

from __future__ import annotations

import pytest

from gpuhost.pve import config as pveconf
from gpuhost.pve import edit

STAGED = (
    "memory: 512\ndev0: /dev/nvidia0,gid=44\ndev1: /dev/nvidia1,gid=44\n\n[pve:pending]\ndev0: /dev/nvidia9,gid=44\n"
)


def test_revert_then_delete_in_two_calls():
    conf = pveconf.parse(STAGED, "lxc")
    change = edit.drift(conf, {"dev0": None, "dev1": None})
    calls = change.calls()
    assert calls == [(("revert", "dev0"), ("delete", "dev1")), (("delete", "dev0"),)]
    for params in calls:
        keys = dict(params)
        assert not set(keys.get("delete", "").split(",")) & set(keys.get("revert", "").split(","))
    with pytest.raises(ValueError, match="two calls"):
        change.params()


def test_the_two_calls_leave_the_key_gone():
    conf = pveconf.parse(STAGED, "lxc")
    after = conf
    for params in edit.drift(conf, {"dev0": None}).calls():
        after = edit.apply_params(after, params, running=False)
    assert after.get("dev0") is None and edit.effective_value(after, "dev0") is None
