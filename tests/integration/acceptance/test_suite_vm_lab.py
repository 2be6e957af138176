"""The VM part of the acceptance suite against a lab node gpuhost provisioned with the VM path (2 GPUs, VM 110
booted over real SSH): it passes, and it fails naming the check and its finding once the VM's clique args
are removed from its configuration behind gpuhost's back."""

import json

import pytest

from tests.integration.provision.conftest import gpuhost, run_json

pytestmark = pytest.mark.integration
VMID = 110
CONF = f"/etc/pve/qemu-server/{VMID}.conf"
GUEST_CHECKS = ("vm.guest_driver", "vm.guest_persistenced", "vm.guest_p2p")
HOST_CHECKS = ("vm.running", "vm.q35", "vm.functions", "vm.pcie", "vm.cliques", "vm.no_kvm_off", "vm.vfio_bound")


@pytest.fixture(scope="module")
def lab(make_lab):
    handle = make_lab([("grub", "intel")], gpus=2, gpu_vm=VMID)
    code, report = run_json("provision", "host", "-i", str(handle.inventory), "-e", "gpu_path=vm", "--allow-reboot")
    assert code == 0, [t.get("error") for t in report["tasks"] if t["status"] == "failed"]
    assert handle.run("pve1", f"qm start {VMID}").rc == 0
    code, report = run_json("provision", "vm", "-i", str(handle.inventory), "--allow-restart")
    assert code == 0, [t.get("error") for t in report["tasks"] if t["status"] == "failed"]
    return handle


def test_provisioned_vm_passes_with_table_json_and_junit(lab, tmp_path):
    table = gpuhost("verify", "vm", "-i", str(lab.inventory))
    assert table.returncode == 0, table.stdout + table.stderr
    assert "vm.cliques" in table.stdout and "vm.guest_p2p" in table.stdout
    junit = tmp_path / "vm.xml"
    r = gpuhost("verify", "vm", "-i", str(lab.inventory), "--vmid", str(VMID), "--json", "--junit-xml", str(junit))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert {t["check"]: t["outcome"] for t in doc["tests"]} == {c: "PASS" for c in HOST_CHECKS + GUEST_CHECKS}
    messages = {t["check"]: t["message"] for t in doc["tests"]}
    assert messages["vm.q35"].startswith("-machine type=q35")
    assert messages["vm.pcie"] == "2 vfio-pci GPUs on PCIe root ports"
    assert messages["vm.guest_p2p"].startswith("P2P available on all 2 GPU pairs that share a clique")
    xml = junit.read_text()
    assert f'tests="{len(HOST_CHECKS + GUEST_CHECKS)}"' in xml and 'failures="0"' in xml
    assert gpuhost("verify", "vm", "-i", str(lab.inventory), "--vmid", "999").returncode == 2


def test_the_guest_backend_reaches_the_vm_over_ssh(lab):
    import testinfra

    from gpuhost.acceptance import backend, connections  # noqa: F401  (backend: testinfra's gpuhost schemes)
    from gpuhost.inventory.loader import load_inventory

    connections.use_inventory(load_inventory(lab.inventory))
    try:
        guest = testinfra.get_host(f"qm-guest://pve1/{VMID}")
        assert guest.run("nvidia-smi -L").stdout.count("GPU ") == 2
        assert guest.service("nvidia-persistenced").is_running
        assert guest.run("exit 3").rc == 3
        assert not guest.file(CONF).exists  # the guest, not the node
    finally:
        connections.use_inventory(None)


def test_clique_args_removed_behind_gpuhosts_back_fail_naming_the_check(lab):
    conf = lab.run("pve1", f"cat {CONF}").stdout
    assert "args" in [line.split(":")[0] for line in conf.splitlines()]
    lab.run("pve1", f"sed -i '/^args:/d' {CONF}")
    try:
        code, doc = run_json("verify", "vm", "-i", str(lab.inventory))
        assert code == 1
        failed = {(t["check"], t["message"]) for t in doc["tests"] if t["outcome"] in ("FAIL", "ERROR")}
        assert (
            "vm.cliques",
            "no '-set device.hostpci0.x-nv-gpudirect-clique=0'; no '-set device.hostpci1.x-nv-gpudirect-clique=0'",
        ) in failed
        table = gpuhost("verify", "vm", "-i", str(lab.inventory))
        assert table.returncode == 1 and "vm.cliques" in table.stdout and "x-nv-gpudirect-clique" in table.stdout
    finally:
        lab.run("pve1", f"cat > {CONF} <<'EOF'\n{conf}EOF")
    assert gpuhost("verify", "vm", "-i", str(lab.inventory)).returncode == 0
