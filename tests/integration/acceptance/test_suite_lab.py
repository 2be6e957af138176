"""The acceptance suite against a lab node gpuhost provisioned (LXC path): it passes, and it fails naming
the check and its finding for each breakage done on purpose."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.provision.conftest import gpuhost, run_json
from tests.integration.provision.test_provision_lxc import with_pin

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def lab(make_lab, tmp_path_factory):
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))  # the drift snapshots of this module
    handle = make_lab([("systemd-boot", "amd")], gpus=2)
    code, report = run_json("provision", "lxc", "-i", str(handle.inventory), "--allow-reboot", "--allow-restart")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    return handle


def verify(lab, kind, *extra, inventory=None):
    return gpuhost("verify", kind, "-i", str(inventory or lab.inventory), *extra)


def failed(doc):
    return {(t["check"], t["message"]) for t in doc["tests"] if t["outcome"] in ("FAIL", "ERROR")}


def test_provisioned_node_passes_host_and_lxc_with_table_json_and_junit(lab, tmp_path):
    host = verify(lab, "host")
    assert host.returncode == 0, host.stdout + host.stderr
    for line in ("host.cmdline_booted", "host.cmdline_configured", "/etc/kernel/cmdline has", "host.nvidia_uvm"):
        assert line in host.stdout
    assert "gpu_path is lxc: vfio-pci binding is not expected" in host.stdout  # a skip says why
    junit = tmp_path / "lxc.xml"
    lxc = verify(lab, "lxc", "--json", "--junit-xml", str(junit))
    assert lxc.returncode == 0, lxc.stdout + lxc.stderr
    doc = json.loads(lxc.stdout)
    outcomes = {t["check"]: t["outcome"] for t in doc["tests"]}
    assert outcomes == {
        c: "PASS"
        for c in (
            "ct.running",
            "ct.devices_configured",
            "ct.device_nodes",
            "ct.gpus_listed",
            "ct.driver_match",
            "ct.driver_held",
            "ct.uvm",
            "ct.memlock",
            "ct.cuda_init",
        )
    }
    xml = junit.read_text()
    assert 'tests="9"' in xml and 'failures="0"' in xml and "ct.cuda_init" in xml


def test_plain_pytest_runs_the_suite(lab):
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "gpuhost.acceptance.plugin", "--gpuhost-inventory", str(lab.inventory)]
        + ["tests/acceptance", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "test_lxc.py::test_container" not in r.stdout  # -q: a summary line, no failures
    assert "passed" in r.stdout and "failed" not in r.stdout


def test_the_everyday_verify_runs_without_pytest_and_reports_what_the_run_under_pytest_reports(lab):
    """``verify`` without ``--junit-xml`` or ``-v`` does not start pytest; test for test, outcome for outcome and
    message for message, it reports what the same proofs report under pytest: on a passing container, and on a
    stopped one (whose proofs inside it error on the stopped container)."""

    def rows(*extra: str) -> tuple[int, list[tuple[str, ...]]]:
        code, doc = run_json("verify", "lxc", "-i", str(lab.inventory), *extra)
        return code, sorted((t["test"], t["outcome"], t["check"], t["subject"], t["message"]) for t in doc["tests"])

    plain = gpuhost("verify", "lxc", "-i", str(lab.inventory), env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert plain.returncode == 0, plain.stdout + plain.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in plain.stderr.splitlines() if line.startswith("import time")}
    assert "gpuhost.acceptance.plain" in imported
    assert not {"pytest", "_pytest", "testinfra"} & imported
    assert rows() == rows("-v")
    cuda = ("test_lxc.py::test_container[pve1/200-ct.cuda_init]", "PASS", "ct.cuda_init", "pve1/CT 200")
    assert (*cuda, "cuInit ok, 2 CUDA devices") in rows()[1]
    lab.run("pve1", "pct stop 200")
    try:
        code, found = rows()
        assert (code, found) == rows("-v")
        assert code == 1
        outcomes = {(t[0].split("::")[1].split("[")[0], t[1]) for t in found}
        assert ("test_running", "FAIL") in outcomes and ("test_devices_configured", "PASS") in outcomes
        assert ("test_driver_held", "ERROR") in outcomes
        assert [t[4] for t in found if t[0].endswith("ct.memlock]")] == ["ct.running pve1/CT 200: CT 200 is stopped"]
    finally:
        lab.run("pve1", "pct start 200")
    assert verify(lab, "lxc").returncode == 0


def test_backend_runs_testinfra_modules_inside_the_container(lab):
    import testinfra

    from gpuhost.acceptance import backend, connections  # noqa: F401  (backend: testinfra's gpuhost schemes)
    from gpuhost.inventory.loader import load_inventory

    connections.use_inventory(load_inventory(lab.inventory))
    try:
        ct = testinfra.get_host("pct://pve1/200")
        assert ct.backend.get_connection_type() == "pct"
        # the lab's inventory names the CT "llm" (lab/gpu/inventory.py); pct create writes it to the CT's
        # /etc/hostname and the CT's UTS namespace carries it
        assert ct.run("cat /etc/hostname").stdout.strip() == "llm"
        assert ct.run("hostname").stdout.strip() == "llm"
        assert ct.file("/etc/apt/preferences.d/gpuhost-nvidia.pref").contains("Pin-Priority: -1")
        assert ct.file("/dev/nvidia-uvm").exists and ct.run("test -c %s", "/dev/nvidia-uvm").rc == 0
        assert ct.package("bash").is_installed
        assert not ct.package("no-such-package-gpuhost").is_installed
        assert ct.run("nvidia-smi -L").stdout.count("GPU ") == 2
        assert ct.run("exit 3").rc == 3
        node = testinfra.get_host("gpuhost://pve1")
        assert node.file("/etc/pve/lxc/200.conf").contains("dev0: /dev/nvidia0")
        assert node.service("nvidia-persistenced").is_running
    finally:
        connections.use_inventory(None)


def test_a_token_removed_from_the_boot_entry_fails_naming_it_and_drift_lists_it(lab):
    before = lab.run("pve1", "cat /etc/kernel/cmdline").stdout
    lab.run("pve1", "sed -i 's/ iommu=pt//' /etc/kernel/cmdline")
    try:
        r = verify(lab, "host", "--drift")
        assert r.returncode == 1
        assert "host.cmdline_configured" in r.stdout and "/etc/kernel/cmdline lacks iommu=pt" in r.stdout
        assert "the next boot comes up without iommu=pt" in r.stdout
        assert "1 changed since" in r.stdout and "/etc/kernel/cmdline:" in r.stdout
    finally:
        lab.run("pve1", f"cat > /etc/kernel/cmdline <<'EOF'\n{before}EOF")
    assert verify(lab, "host").returncode == 0


def test_a_deleted_devn_entry_fails_naming_the_device(lab):
    conf = lab.run("pve1", "cat /etc/pve/lxc/200.conf").stdout
    lab.run("pve1", "sed -i '/^dev1:/d' /etc/pve/lxc/200.conf")
    try:
        code, doc = run_json("verify", "lxc", "-i", str(lab.inventory))
        assert code == 1
        assert failed(doc) == {("ct.devices_configured", "/etc/pve/lxc/200.conf does not pass /dev/nvidia1")}
    finally:
        lab.run("pve1", f"cat > /etc/pve/lxc/200.conf <<'EOF'\n{conf}EOF")


def test_missing_uvm_on_the_host_fails(lab):
    lab.run("pve1", "rm -f /dev/nvidia-uvm")
    try:
        r = verify(lab, "host")
        assert r.returncode == 1
        assert "host.nvidia_uvm" in r.stdout and "/dev/nvidia-uvm is missing" in r.stdout
        assert "nvidia-modprobe -c0 -u" in r.stdout
    finally:
        lab.run("pve1", "nvidia-modprobe -c0 -u")
    assert verify(lab, "host").returncode == 0


def test_driver_upgraded_on_the_host_only_fails_the_container_match(lab, tmp_path):
    newer = with_pin(lab, tmp_path, "580.105.08")
    code, report = run_json("provision", "host", "-i", str(newer), "--allow-reboot")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    code, doc = run_json("verify", "lxc", "-i", str(newer))
    assert code == 1
    assert ("ct.driver_match", "container userspace 580.95.05, host module 580.105.08") in failed(doc)
