"""Before a node reboots: guests listed, quorum kept, HA resources moved off under maintenance, then restored.

Every ``pvecm status``, ``ha-manager status``, ``pct list`` and ``qm list`` text here is a real capture from
tests/fixtures/cluster/ (SOURCE.md names where each one comes from); the numbers each test expects were read off
the file. The quorum and HA steps are tested here with a connection that answers each command with a capture (the lab's
cluster runs them end to end: tests/integration/lab/test_cluster_rolling.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.connection.local import LocalConnection
from gpuhost.core.result import CommandResult
from gpuhost.errors import OperationFailed
from gpuhost.pve.guest_lists import PctRow, QmRow, parse_pct_list, parse_qm_list, pct_rows, qm_rows
from gpuhost.pve.ha import HaService, parse_ha_status
from gpuhost.pve.quorum import parse_pvecm_status, quorum_refusal
from gpuhost.pve.reboot_guard import after_reboot, before_reboot

CLUSTER = Path(__file__).resolve().parents[2] / "fixtures" / "cluster"


def capture(kind: str, name: str) -> str:
    return (CLUSTER / kind / name).read_text()


# -- pvecm status ---------------------------------------------------------------------------------

#: file: nodes, expected votes, total votes, quorum, quorate, flags, members, the local row (index), QDevice votes
PVECM = {
    "2node-calotech-node1.txt": (2, 2, 2, 2, True, ("Quorate",), 2, 0, 0),
    "2node-calotech-node2.txt": (2, 2, 2, 2, True, ("Quorate",), 2, 1, 0),
    "2node-proxmox.txt": (2, 2, 2, 2, True, ("Quorate",), 2, 0, 0),
    "2node-qdevice.txt": (2, 3, 3, 2, True, ("Quorate", "Qdevice"), 3, 0, 1),
    "4node-qdevice-two-down.txt": (2, 4, 3, 3, True, ("Quorate", "Qdevice"), 3, 1, 1),
    "3node-venusto-not-quorate.txt": (1, 3, 1, 2, False, (), 0, None, 0),
    "pve4-2node-proxmox02-blank-lines-with-spaces.txt": (2, 2, 2, 2, True, ("Quorate",), 2, 1, 0),
    "pve4-2node-prx02-not-quorate.txt": (1, 2, 1, 2, False, (), 1, 0, 0),
    "pve4-3node-prx03.txt": (3, 3, 3, 2, True, ("Quorate",), 3, 2, 0),
    "pve8-3node-2node-flag-pmx5.txt": (3, 3, 3, 2, True, ("2Node", "Quorate", "WaitForAll"), 3, 2, 0),
    "pve8-5node-kube02.txt": (5, 5, 5, 3, True, ("Quorate",), 5, 3, 0),
    "pve9-3node-labcluster.txt": (3, 3, 3, 2, True, ("Quorate",), 3, 0, 0),
    "pve9-3node-myclust-pve03.txt": (3, 3, 3, 2, True, ("Quorate",), 3, 2, 0),
    "pve9-5node-pve-nd01.txt": (5, 5, 5, 3, True, ("Quorate",), 5, 0, 0),
}


#: file: what the refusal says of a pvecm status without quorum information
PVECM_ERRORS = {
    "not-a-cluster.txt": "pvecm status: not a cluster member (Error: Corosync config '/etc/pve/corosync.conf' does "
    "not exist - is this node part of a cluster?)",
    "pve4-not-a-cluster.txt": "pvecm status: not a cluster member (Corosync config '/etc/pve/corosync.conf' does not "
    "exist - is this node part of a cluster?)",
    "pve4-corosync-not-running.txt": "pvecm status printed no quorum information (Cannot initialize CMAP service)",
}


def test_every_pvecm_capture_is_checked():
    assert sorted(p.name for p in (CLUSTER / "pvecm-status").iterdir()) == sorted([*PVECM, *PVECM_ERRORS])


@pytest.mark.parametrize("name", sorted(PVECM))
def test_pvecm_status_numbers(name: str) -> None:
    nodes, expected, total, quorum, quorate, flags, members, local, qdevice = PVECM[name]
    q = parse_pvecm_status(capture("pvecm-status", name))
    assert (q.nodes, q.expected_votes, q.total_votes, q.quorum, q.quorate) == (nodes, expected, total, quorum, quorate)
    assert q.flags == flags
    assert len(q.members) == members
    assert [i for i, m in enumerate(q.members) if m.local] == ([] if local is None else [local])
    assert q.local_votes == (None if local is None else 1)
    assert q.qdevice_votes == qdevice


def test_pvecm_members_with_a_qdevice_column():
    q = parse_pvecm_status(capture("pvecm-status", "4node-qdevice-two-down.txt"))
    assert [(m.nodeid, m.votes, m.name, m.local, m.qdevice) for m in q.members] == [
        (1, 1, "192.168.51.239", False, "A,V,NMW"),
        (2, 1, "192.168.50.218", True, "A,V,NMW"),
        (0, 1, "Qdevice", False, None),
    ]
    q = parse_pvecm_status(capture("pvecm-status", "pve8-5node-kube02.txt"))
    assert [(m.nodeid, m.name) for m in q.members if m.local] == [(4, "10.100.4.102")]


@pytest.mark.parametrize("name", sorted(PVECM_ERRORS))
def test_pvecm_status_without_quorum_information_names_the_reason(name: str) -> None:
    with pytest.raises(OperationFailed) as err:
        parse_pvecm_status(capture("pvecm-status", name))
    assert str(err.value) == PVECM_ERRORS[name]


#: file: why the node must not reboot (None: it may)
REFUSALS = {
    "2node-calotech-node1.txt": "would lose the cluster's quorum (2 of 2 expected votes present, 1 of them this "
    "node's, 2 needed)",
    "2node-calotech-node2.txt": "would lose the cluster's quorum (2 of 2 expected",
    "2node-proxmox.txt": "would lose the cluster's quorum (2 of 2 expected",
    "2node-qdevice.txt": None,  # the QDevice's vote stays with the other node: 2 of quorum 2
    "4node-qdevice-two-down.txt": "would lose the cluster's quorum (3 of 4 expected votes present, 1 of them this "
    "node's, 3 needed)",
    "3node-venusto-not-quorate.txt": "the cluster is not quorate now (1 of 3 expected votes, 2 needed",
    "pve4-2node-proxmox02-blank-lines-with-spaces.txt": "would lose the cluster's quorum (2 of 2 expected",
    "pve4-2node-prx02-not-quorate.txt": "the cluster is not quorate now (1 of 2 expected votes, 2 needed",
    "pve4-3node-prx03.txt": None,
    "pve8-3node-2node-flag-pmx5.txt": None,
    "pve8-5node-kube02.txt": None,
    "pve9-3node-labcluster.txt": None,
    "pve9-3node-myclust-pve03.txt": None,
    "pve9-5node-pve-nd01.txt": None,
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_which_captured_clusters_let_the_node_reboot(name: str) -> None:
    why = quorum_refusal(parse_pvecm_status(capture("pvecm-status", name)))
    want = REFUSALS[name]
    if want is None:
        assert why is None
    else:
        assert why is not None and want in why


# -- ha-manager status ----------------------------------------------------------------------------

#: file: master, each lrm's state, each service (sid, node, state)
HA = {
    "2node-proxmox.txt": ("proxmox", {"proxmox": "idle", "proxmox2": "active"}, [("vm:100", "proxmox2", "started")]),
    "pve4-2node-ct-and-vm.txt": (
        "proxmox01",
        {"proxmox01": "active", "proxmox02": "active"},
        [
            ("ct:100", "proxmox01", "started"),
            ("ct:101", "proxmox02", "started"),
            ("ct:103", "proxmox01", "started"),
            ("vm:102", "proxmox01", "started"),
        ],
    ),
    "pve8-myclust-pve01-in-maintenance.txt": (
        "pve03",
        {"pve01": "maintenance mode", "pve02": "active", "pve03": "active"},
        [
            ("vm:100", "pve03", "started"),
            ("vm:101", "pve02", "started"),
            ("vm:102", "pve02", "started"),
            ("vm:104", "pve03", "started"),
            ("vm:105", "pve02", "started"),
        ],
    ),
    "pve9-5node-started-stopped-ignored.txt": (
        "pve-nd02",
        {"pve-nd01": "active", "pve-nd02": "idle", "pve-nd03": "active", "pve-nd04": "active", "pve-nd05": "active"},
        [
            ("vm:100002", "pve-nd01", "started"),
            ("vm:106", "pve-nd04", "started"),
            ("vm:115", "pve-nd03", "stopped"),
            ("vm:116", "pve-nd01", "stopped"),
            ("vm:809", "pve-nd03", "stopped"),
            ("vm:9502", "pve-nd05", "started"),
            ("vm:9503", "pve-nd05", "ignored"),
        ],
    ),
    "pve9-fencing-and-watchdog.txt": (
        "proxmox",
        {"proxmox": "idle", "pve2": "active", "pve3": "idle"},
        [("vm:200", "pve2", "stopped")],
    ),
    "pve9-myclust-from-pve03.txt": (
        "pve02",
        {"pve01": "active", "pve02": "active", "pve03": "active"},
        [
            ("vm:100", "pve03", "started"),
            ("vm:101", "pve01", "started"),
            ("vm:102", "pve02", "started"),
            ("vm:104", "pve03", "started"),
            ("vm:105", "pve01", "started"),
        ],
    ),
    "standalone-node.txt": (None, {}, []),
}


def test_every_ha_capture_is_checked():
    assert sorted(p.name for p in (CLUSTER / "ha-manager-status").iterdir()) == sorted(HA)


@pytest.mark.parametrize("name", sorted(HA))
def test_ha_manager_status(name: str) -> None:
    master, lrm, services = HA[name]
    st = parse_ha_status(capture("ha-manager-status", name))
    assert st.quorum_ok
    assert (st.master, st.lrm) == (master, lrm)
    assert [(s.sid, s.node, s.state) for s in st.services] == services


def test_what_a_reboot_would_stop_leaves_stopped_and_ignored_resources_out():
    st = parse_ha_status(capture("ha-manager-status", "pve9-5node-started-stopped-ignored.txt"))
    assert st.to_move("pve-nd01") == [HaService("vm:100002", "pve-nd01", "started")]  # vm:116 is stopped
    assert st.to_move("pve-nd03") == [] and st.to_move("pve-nd02") == []
    assert st.to_move("pve-nd05") == [HaService("vm:9502", "pve-nd05", "started")]  # vm:9503 is ignored
    ct = parse_ha_status(capture("ha-manager-status", "pve4-2node-ct-and-vm.txt"))
    assert [s.sid for s in ct.to_move("proxmox01")] == ["ct:100", "ct:103", "vm:102"]


# -- pct list, qm list ----------------------------------------------------------------------------


def test_pct_list_rows_with_a_lock_wider_than_its_column():
    rows = pct_rows(capture("pct-list", "snapshot-delete-lock.txt"))
    assert len(rows) == 10
    assert rows[1] == PctRow(101, "stopped", "snapshot-delete", "immich-docker")
    assert rows[3] == PctRow(108, "stopped", "snapshot-delete", "vaultwarden")
    assert rows[2] == PctRow(107, "stopped", "", "CT107")
    assert [str(g) for g in parse_pct_list(capture("pct-list", "snapshot-delete-lock.txt"))] == [
        "CT 100 (nginx-reverse-proxy)",
        "CT 110 (Rex)",
        "CT 113 (boycott-list)",
        "CT 200 (tailscale-vpn)",
        "CT 301 (laSignare)",
    ]


def test_pct_list_padded_to_its_columns():
    rows = pct_rows(capture("pct-list", "pmx5-14-containers.txt"))
    assert len(rows) == 14 and all(r.lock == "" for r in rows)
    assert rows[8] == PctRow(151, "running", "", "new-villabadjo")
    running = [g.id for g in parse_pct_list(capture("pct-list", "pmx5-14-containers.txt"))]
    assert running == [105, 107, 112, 119, 121, 151, 153, 155, 156, 157, 158]  # 117, 118, 122 are stopped
    assert pct_rows(capture("pct-list", "proxmox2-default-names.txt")) == [
        PctRow(100, "stopped", "", "CT100"),
        PctRow(101, "stopped", "", "CT101"),
    ]
    assert parse_pct_list(capture("pct-list", "proxmox2-default-names.txt")) == []


def test_qm_list_rows():
    assert qm_rows(capture("qm-list", "ovh1-two-running.txt")) == [
        QmRow(202, "discourse", "running", 4096, 32.0, 4936),
        QmRow(203, "monitoring", "running", 12288, 32.0, 46654),
    ]
    assert [str(g) for g in parse_qm_list(capture("qm-list", "pmx5-one-vm.txt"))] == ["VM 138 (docker)"]


def test_qm_list_with_a_name_longer_than_its_column():
    rows = qm_rows(capture("qm-list", "pvenode02-name-longer-than-its-column.txt"))
    assert [r.vmid for r in rows] == [302, 303, 304, 305, 9300]
    assert rows[-1] == QmRow(9300, "jammy-server-cloudimg-amd64", "stopped", 4096, 0.0, 0)
    assert parse_qm_list(capture("qm-list", "pvenode02-name-longer-than-its-column.txt")) == []


# -- before and after the reboot --------------------------------------------------------------------


class Scripted(LocalConnection):
    """Answers each command from a table of (exit status, stdout, stderr) by its prefix; a list is answered in
    turn, its last answer repeated. Records what ran."""

    def __init__(self, name: str, answers: dict[str, list[tuple[int, str, str]]]) -> None:
        super().__init__(name)
        self.answers, self.ran = answers, []
        self.asked: dict[str, int] = {}

    def _exec(self, command, stdin, timeout, stdout_sink=None):  # noqa: ANN001
        self.ran.append(command)
        for prefix, seq in self.answers.items():
            if command.startswith(prefix):
                n = self.asked.get(prefix, 0)
                self.asked[prefix] = n + 1
                rc, out, err = seq[min(n, len(seq) - 1)]
                return CommandResult(command, rc, out, err)
        return CommandResult(command, 0, "", "")


def node(
    hostname: str,
    pvecm: str,
    ha: list[str],
    pct: str = "pmx5-14-containers.txt",
    qm: str = "pmx5-one-vm.txt",
) -> Scripted:
    return Scripted(
        hostname,
        {
            "command -v pct": [(0, capture("pct-list", pct), "")],
            "command -v qm": [(0, capture("qm-list", qm), "")],
            "pgrep": [(0, "", "")],
            "test -e /etc/pve/corosync.conf": [(0, "", "")],
            "pvecm status": [(0, capture("pvecm-status", pvecm), "")],
            "hostname": [(0, hostname + "\n", "")],
            "ha-manager status": [(0, capture("ha-manager-status", f), "") for f in ha],
        },
    )


class Clock:
    def __init__(self) -> None:
        self.now, self.slept = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_ha_resources_are_moved_off_before_the_reboot_and_maintenance_is_lifted_after(caplog):
    """pve01 of "myclust": its two VMs are moved off under maintenance before it reboots.

    The ha-manager texts are that cluster's (cluster-wide, the same on every node): first with vm:101 and vm:105
    on pve01, then once it was in maintenance mode. The pvecm text is the same cluster's, taken on pve03 (each
    node has one vote). The guest lists are pmx5's (another host): only the reported line is checked with them."""
    conn = node(
        "pve01",
        "pve9-3node-myclust-pve03.txt",
        ["pve9-myclust-from-pve03.txt", "pve9-myclust-from-pve03.txt", "pve8-myclust-pve01-in-maintenance.txt"],
    )
    clock = Clock()
    with caplog.at_level("INFO", logger="gpuhost.progress"):
        guard = before_reboot(conn, allow_serving=False, sleep=clock.sleep, clock=clock)
        enabled_at = conn.ran.index("ha-manager crm-command node-maintenance enable pve01")
        assert conn.ran[enabled_at + 1 :].count("ha-manager status") == 2  # the reboot waited for the move
        after_reboot(conn, guard)
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == (
        "reboot: guests that go down with the node: CT 105 (dm-gitlab), CT 107 (minio), CT 112 (sonar), "
        "CT 119 (minio3), CT 121 (dev70), CT 151 (new-villabadjo), CT 153 (records), CT 155 (fileserver2), "
        "CT 156 (hoppscotch2), CT 157 (app), CT 158 (lk-learn1), VM 138 (docker)"
    )
    assert said[1] == (
        "reboot: HA maintenance enabled for pve01; waiting for the HA stack to move vm:101 (started), "
        "vm:105 (started) away"
    )
    assert "reboot: HA moving off pve01: vm:101, vm:105 (LRM: active)" in said
    assert "reboot: HA resources moved off pve01 (its LRM in maintenance mode)" in said
    assert said[-1] == "reboot: HA maintenance disabled for pve01"
    assert clock.slept == [5.0]
    assert conn.ran[-1] == "ha-manager crm-command node-maintenance disable pve01"
    assert not guard.maintenance


def test_resources_that_are_not_moved_in_time_stop_the_reboot_and_lift_maintenance_again():
    """pve-nd01 holds vm:100002 (started); here the HA stack never moves it (the status stays as captured)."""
    conn = node("pve-nd01", "pve9-5node-pve-nd01.txt", ["pve9-5node-started-stopped-ignored.txt"])
    clock = Clock()
    with pytest.raises(OperationFailed) as err:
        before_reboot(conn, allow_serving=False, sleep=clock.sleep, clock=clock, move_timeout=60)
    assert str(err.value) == (
        "pve-nd01: after 60 s the HA stack has not moved everything off pve-nd01 (its LRM: active; still there: "
        "vm:100002 (started)); maintenance was disabled again and the node is not rebooted"
    )
    assert conn.ran[-1] == "ha-manager crm-command node-maintenance disable pve-nd01"
    assert len(clock.slept) == 12


@pytest.mark.parametrize(
    "hostname, pvecm, ha",
    [
        ("proxmox", "pve9-3node-labcluster.txt", "pve9-fencing-and-watchdog.txt"),  # vm:200 is on pve2, stopped
        ("pve-nd03", "pve9-5node-pve-nd01.txt", "pve9-5node-started-stopped-ignored.txt"),  # only stopped ones
    ],
)
def test_a_node_without_running_ha_resources_needs_no_maintenance(hostname: str, pvecm: str, ha: str) -> None:
    conn = node(hostname, pvecm, [ha])
    guard = before_reboot(conn, allow_serving=False)
    assert not guard.maintenance and guard.pve_node == hostname
    assert not any("node-maintenance" in c for c in conn.ran)


@pytest.mark.parametrize(
    "hostname, pvecm, message",
    [
        (
            "proxmox",
            "2node-proxmox.txt",
            "proxmox: rebooting it would lose the cluster's quorum (2 of 2 expected votes present, 1 of them this "
            "node's, 2 needed); bring the other nodes up first",
        ),
        (
            "pve2",
            "4node-qdevice-two-down.txt",
            "pve2: rebooting it would lose the cluster's quorum (3 of 4 expected votes present, 1 of them this "
            "node's, 3 needed); bring the other nodes up first",
        ),
        (
            "prx02",
            "pve4-2node-prx02-not-quorate.txt",
            "prx02: the cluster is not quorate now (1 of 2 expected votes, 2 needed; pvecm status); no node is "
            "rebooted",
        ),
    ],
)
def test_a_reboot_that_would_lose_quorum_is_refused(hostname: str, pvecm: str, message: str) -> None:
    conn = node(hostname, pvecm, ["2node-proxmox.txt"])
    with pytest.raises(OperationFailed) as err:
        before_reboot(conn, allow_serving=False)
    assert str(err.value) == message
    assert not any(c.startswith(("hostname", "ha-manager")) for c in conn.ran)


def test_a_single_node_skips_quorum_and_ha(caplog):
    conn = Scripted(
        "pve",
        {
            "command -v pct": [(0, capture("pct-list", "proxmox2-default-names.txt"), "")],
            "test -e /etc/pve/corosync.conf": [(1, "", "")],
        },
    )
    with caplog.at_level("INFO", logger="gpuhost.progress"):
        guard = before_reboot(conn, allow_serving=False)
    assert [r.getMessage() for r in caplog.records] == ["reboot: guests that go down with the node: none running"]
    assert not guard.maintenance and not any(c.startswith(("pvecm", "ha-manager")) for c in conn.ran)


#: ``ha-manager status`` while the HA stack is disarmed in ``ignore`` mode. No capture of it was found; the text is
#: written from pve-ha-manager b71218f ``src/PVE/API2/HA/Status.pm``: the fencing line
#: ``"$disarm_state, resource mode: $mode ($crm_wd)"``, lrm lines ``"$node ($lrm_mode mode, watchdog released, $time)"``
#: (mode ``disarm``), and every service shown ``ignore`` ("show disarm resource mode instead of internal service state")
DISARMED_IGNORE = """quorum OK
master pve01 (active, Tue Dec 23 19:56:08 2025)
fencing disarmed, resource mode: ignore (CRM watchdog released)
lrm pve01 (disarm mode, watchdog released, Tue Dec 23 19:56:09 2025)
lrm pve02 (disarm mode, watchdog released, Tue Dec 23 19:56:07 2025)
lrm pve03 (disarm mode, watchdog released, Tue Dec 23 19:56:04 2025)
service vm:100 (pve03, ignore)
service vm:101 (pve01, ignore)
"""


def test_resources_of_a_disarmed_ha_stack_are_at_rest_and_need_no_maintenance():
    """Disarmed, the CRM ignores node-maintenance (Manager.pm: "ignoring maintenance command for node … - HA stack
    is disarmed"): waiting for a move would wait 15 minutes for nothing and fail."""
    st = parse_ha_status(DISARMED_IGNORE)
    assert st.on("pve01") == [HaService("vm:101", "pve01", "ignore")]
    assert st.to_move("pve01") == []
    conn = Scripted(
        "pve01",
        {
            "test -e /etc/pve/corosync.conf": [(0, "", "")],
            "pvecm status": [(0, capture("pvecm-status", "pve9-3node-myclust-pve03.txt"), "")],
            "hostname": [(0, "pve01\n", "")],
            "ha-manager status": [(0, DISARMED_IGNORE, "")],
        },
    )
    clock = Clock()
    guard = before_reboot(conn, allow_serving=False, sleep=clock.sleep, clock=clock)
    assert not guard.maintenance and clock.slept == []
    assert not any("node-maintenance" in c for c in conn.ran)


def test_a_serving_node_is_refused_naming_the_server_and_the_flag():
    """``pgrep -af`` prints ``PID COMMAND``; the refusal shows the command and the flag that allows the reboot."""
    conn = Scripted(
        "pve1",
        {
            "pgrep": [(0, "4242 python3 -m sglang.launch_server --model-path /models/glm --port 30000\n", "")],
            "test -e /etc/pve/corosync.conf": [(1, "", "")],
        },
    )
    with pytest.raises(OperationFailed) as err:
        before_reboot(conn, allow_serving=False)
    assert str(err.value) == (
        "pve1 serves a model (python3 -m sglang.launch_server --model-path /models/glm --port 30000); it is not "
        "rebooted unless you name it: --reboot-serving pve1"
    )
    assert not any(c.startswith(("pvecm", "ha-manager", "test -e")) for c in conn.ran)
    before_reboot(conn, allow_serving=True)  # named: it goes on (a single node here)
