"""``gpuhost shell``: an ad-hoc command on real sshd hosts, in parallel, output per host, exit codes."""

import json
import time

import pytest

from tests.integration.conftest import write_inventory
from tests.integration.test_operator_output import gpuhost
from tests.support.sshd_host import make_host, remove

pytestmark = pytest.mark.integration


@pytest.fixture
def two_hosts(sshd_host, tmp_path):
    other = make_host("node2", sshd_host.address.rsplit(".", 1)[0] + ".240").start()
    inventory = write_inventory(tmp_path / "inv.yml", [sshd_host, other])
    inventory.write_text(
        inventory.read_text().replace("  node1:", "  node1:", 1)
        + f"  ghost:\n    address: 127.0.8.250\n    ssh:\n      key_file: {sshd_host.client_key}\n"
        + f"      known_hosts_file: {sshd_host.known_hosts}\n"
        + "groups:\n  pve:\n    nodes: [node1, node2]\n"
    )
    # both hosts' names as the inventory knows them: the helper named each after its own name
    yield inventory
    remove(other)


def test_shell_runs_on_each_host_and_reports_each_exit_code(two_hosts):
    r = gpuhost("shell", "pve", "-i", str(two_hosts), "--", "echo hi-$(hostname -I 2>/dev/null | wc -w); exit 0")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert sorted(line.split(" | ")[0] for line in lines if " | " in line) == ["node1", "node2"]
    assert lines[-1] == "2 of 2 hosts ok"

    r = gpuhost("shell", "all", "-i", str(two_hosts), "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["ok"] is False and report["command"] == "sh -c 'echo out; echo err >&2; exit 3'"
    for name in ("node1", "node2"):
        h = report["hosts"][name]
        assert (h["exit_code"], h["stdout"], h["stderr"], h["unreachable"]) == (3, "out\n", "err\n", False)
    assert report["hosts"]["ghost"]["unreachable"] is True and report["hosts"]["ghost"]["exit_code"] is None


def test_shell_runs_hosts_in_parallel_up_to_forks(two_hosts):
    start = time.monotonic()
    r = gpuhost("shell", "pve", "-i", str(two_hosts), "--", "sleep 2")
    parallel = time.monotonic() - start
    assert r.returncode == 0, r.stderr
    start = time.monotonic()
    r = gpuhost("shell", "pve", "-i", str(two_hosts), "--forks", "1", "--", "sleep 2")
    serial = time.monotonic() - start
    assert r.returncode == 0
    assert serial > 4 and parallel < serial - 1.5, (parallel, serial)


def test_shell_failure_and_unreachable_are_named(two_hosts):
    r = gpuhost("shell", "node1,ghost", "-i", str(two_hosts), "--", "echo fine")
    assert r.returncode == 1
    assert "node1 | ok | rc=0" in r.stdout and "  fine" in r.stdout
    assert "ghost | UNREACHABLE | " in r.stdout
    assert r.stdout.splitlines()[-1] == "1 of 2 hosts ok; failed: ghost"
    bad = gpuhost("shell", "nope", "-i", str(two_hosts), "--", "true")
    assert bad.returncode == 2 and "'nope' is neither a node nor a group" in bad.stderr
