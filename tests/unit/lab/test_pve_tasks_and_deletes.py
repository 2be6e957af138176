"""The lab's tasks and deletions as PVE's code defines them (pve-common RESTEnvironment.pm/UPID.pm,
pve-manager API2/Tasks.pm, pve-container LXC/Config.pm update_pct_config, qemu-server API2/Qemu.pm)."""

from __future__ import annotations

import pytest

from gpuhost.lab.node import paths, pending, pveconf, tasks
from gpuhost.lab.node.errors import PveError


@pytest.fixture(autouse=True)
def task_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "TASKS_DIR", str(tmp_path))


def test_a_task_with_a_warning_ends_warnings_1():
    upid = tasks.run(
        "pve1",
        "vzstart",
        "200",
        "root@pam",
        lambda: [tasks.warn("Systemd 252 detected. You may need to enable nesting.")],
    )
    assert tasks.status(upid)["exitstatus"] == "WARNINGS: 1"
    assert [line["t"] for line in tasks.log(upid)] == [
        "WARN: Systemd 252 detected. You may need to enable nesting.",
        "TASK WARNINGS: 1",
    ]


def test_a_task_that_dies_ends_with_its_error_and_one_without_warnings_ok():
    def fail() -> list[str]:
        raise PveError("CT 200 already running")

    failed = tasks.run("pve1", "vzstart", "200", "root@pam", fail)
    assert tasks.status(failed)["exitstatus"] == "CT 200 already running"
    assert tasks.log(failed)[-1]["t"] == "TASK ERROR: CT 200 already running"
    ok = tasks.run("pve1", "vzstart", "200", "root@pam", lambda: ["started"])
    assert tasks.status(ok)["exitstatus"] == "OK" and tasks.log(ok)[-1]["t"] == "TASK OK"


def test_the_log_endpoint_returns_50_lines_unless_asked():
    upid = tasks.run("pve1", "vzcreate", "200", "root@pam", lambda: [f"line {i}" for i in range(1, 121)])
    assert len(tasks.log(upid)) == 50 and tasks.log(upid)[-1] == {"n": 50, "t": "line 50"}
    whole = tasks.log(upid, limit=0)
    assert len(whole) == 121 and whole[-1] == {"n": 121, "t": "TASK OK"}
    assert tasks.log(upid, start=100, limit=5)[0] == {"n": 101, "t": "line 101"}


def test_lxc_delete_keeps_the_pending_value_qemu_drops_it():
    text = "memory: 512\ndev0: /dev/nvidia0\n\n[pve:pending]\ndev0: /dev/nvidia1\n"
    lxc = pveconf.parse(text, "lxc")
    pending.stage(lxc, {}, [("dev0", False)], [], delete_drops_pending=False)
    assert lxc.pending is not None and lxc.pending.options.get("dev0") == "/dev/nvidia1"
    assert "dev0" in lxc.pending_deletes()
    qemu = pveconf.parse("memory: 512\ncores: 2\n\n[PENDING]\ncores: 4\n", "qemu")
    pending.stage(qemu, {}, [("cores", False)], [], delete_drops_pending=True)
    assert qemu.pending is None or "cores" not in qemu.pending.options
    assert "cores" in qemu.pending_deletes()


def test_deleting_a_key_that_is_not_set_warns():
    conf = pveconf.parse("memory: 512\n", "lxc")
    warnings = pending.stage(conf, {}, [("cpulimit", False)], [], delete_drops_pending=False)
    assert warnings == ["cannot delete 'cpulimit' - not set in current configuration!"]
