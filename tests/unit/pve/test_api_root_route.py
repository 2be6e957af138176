"""The root route (pvesh over SSH) and task results, read as PVE's own code defines them.

The pvesh answers here are what pve-manager's PVE/CLI/pvesh.pm and pve-common's RESTEnvironment.pm print
(the synchronous tee: task log on stdout, then the UPID; the task's end on stderr; exit 0), the task
status values are pve-common UPID.pm's, and the log endpoint follows pve-manager API2/Tasks.pm
``read_task_log`` (``limit`` default 50, 0 = the whole log)."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from gpuhost.connection.local import LocalConnection
from gpuhost.core.result import CommandResult
from gpuhost.errors import OperationFailed
from gpuhost.pve.api import PveApi, task_succeeded

UPID = "UPID:pve1:0001E240:0ABCDEF0:67000000:vzcreate:200:root@pam:"


class FakePvesh(LocalConnection):
    """Answers ``pvesh`` as a node would, for one finished task with ``log`` and ``exitstatus``."""

    def __init__(self, log: list[str], exitstatus: str, stdout: str = "", stderr: str = "", rc: int = 0) -> None:
        super().__init__("pve1")
        self.log, self.exitstatus = log, exitstatus
        self.answer = (rc, stdout, stderr)
        self.ran: list[str] = []

    def _exec(self, command, stdin, timeout, stdout_sink=None):  # noqa: ANN001
        self.ran.append(command)
        argv = shlex.split(command)
        path = argv[2]
        if path.endswith("/status"):
            status = {"status": "stopped", "exitstatus": self.exitstatus, "upid": UPID}
            return CommandResult(command, 0, json.dumps(status) + "\n", "")
        if path.endswith("/log"):
            opts = dict(a.split("=", 1) for a in argv[3:] if "=" in a)
            start = int(opts.get("--start", 0))
            limit = int(opts.get("--limit", 50))
            chosen = self.log[start:] if limit == 0 else self.log[start : start + limit]
            lines = [{"n": start + i + 1, "t": t} for i, t in enumerate(chosen)]
            return CommandResult(command, 0, json.dumps(lines) + "\n", "")
        return CommandResult(command, *self.answer)


def test_pve_task_status_semantics():
    # pve-common UPID.pm status_is_error: only OK and WARNINGS: N are success
    assert task_succeeded("OK") and task_succeeded("WARNINGS: 1") and task_succeeded("WARNINGS: 12")
    assert not task_succeeded("unexpected status")
    assert not task_succeeded("WARNINGS: ")
    assert not task_succeeded("command 'lxc-start -n 200' failed: exit code 1")


def test_a_task_that_ends_warnings_is_a_success_and_keeps_its_warnings():
    log = ["extracting archive", "WARN: Systemd 252 detected. You may need to enable nesting.", "TASK WARNINGS: 1"]
    conn = FakePvesh(
        log, "WARNINGS: 1", stdout="\n".join(log[:2]) + f'\n"{UPID}"\n', stderr="Task finished with 1 warning(s)!\n"
    )
    api = PveApi(conn)
    upid = api.call("post", "nodes/pve1/lxc", {"vmid": 200})
    assert upid == UPID
    outcome = api.wait_task(upid)
    assert outcome is not None and outcome.warnings == ("Systemd 252 detected. You may need to enable nesting.",)
    assert api.take_warnings() == ["Task finished with 1 warning(s)!"]


def test_a_failed_synchronous_task_is_a_failure_though_pvesh_exits_0():
    log = ["extracting archive", "TASK ERROR: unable to create CT 200 - no space left on device"]
    conn = FakePvesh(log, "unable to create CT 200 - no space left on device", stdout=f'extracting archive\n"{UPID}"\n')
    api = PveApi(conn)
    with pytest.raises(OperationFailed) as info:
        api.wait_task(api.call("post", "nodes/pve1/lxc", {"vmid": 200}))
    assert "no space left on device" in str(info.value)


def test_the_failure_text_comes_from_the_end_of_a_long_log():
    log = [f"progress {i}%" for i in range(120)] + ["the real error", "TASK ERROR: the real error"]
    api = PveApi(FakePvesh(log, "the real error"))
    with pytest.raises(OperationFailed) as info:
        api.wait_task(UPID)
    assert "progress 119% | the real error" in str(info.value)


def test_stderr_lines_of_an_applied_change_are_warnings_not_a_failure():
    stderr = (
        "vm 200 - lxc.cgroup.devices.allow is deprecated, this will be a hard error in the future!\n"
        "cannot delete 'cpulimit' - not set in current configuration!\n"
    )
    api = PveApi(FakePvesh([], "OK", stdout="", stderr=stderr))
    assert api.call("put", "nodes/pve1/lxc/200/config", {"cores": 2, "delete": "cpulimit"}) is None
    assert api.take_warnings() == stderr.splitlines()


def test_a_refused_call_is_a_failure_with_pves_text():
    stderr = (
        "400 Parameter verification failed.\ndelete: you can't use '-delete dev0' and '-revert dev0' at the same time\n"
    )
    api = PveApi(FakePvesh([], "OK", stderr=stderr, rc=255))
    with pytest.raises(OperationFailed) as info:
        api.call("put", "nodes/pve1/lxc/200/config", {"delete": "dev0", "revert": "dev0"})
    assert "at the same time" in str(info.value)


def test_a_task_call_gets_the_task_timeout():
    conn = FakePvesh([], "OK", stdout=f'"{UPID}"\n')
    seen: list[float | None] = []
    real = conn._exec

    def spy(command, stdin, timeout, stdout_sink=None):  # noqa: ANN001
        seen.append(timeout)
        return real(command, stdin, timeout, stdout_sink)

    conn._exec = spy  # type: ignore[method-assign]
    PveApi(conn, timeout=60, task_timeout=900).call("post", "nodes/pve1/lxc/200/status/start")
    PveApi(conn, timeout=60, task_timeout=900).call("get", "nodes/pve1/lxc/200/status/current")
    assert seen == [900, 60]
    assert re.match(r"pvesh create /nodes/pve1/lxc/200/status/start --output-format json$", conn.ran[0])
