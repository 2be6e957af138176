"""`gpuhost provision vm` on a lab node seeded like the seeds' VM (i440fx, 8 GPUs as bare hostpci ids, no
pcie=1, no clique): the host's VM path, q35 with pcie=1 and cliques through PVE's API (pending on the
running VM until an allowed restart), qm showcmd, the driver in the booted guest, and the guest driver's
P2P status; the unfixed VM's guest reports P2P off and the check names why."""

import json
import re
import shlex

import pytest

from gpuhost.core.actions import PveCall
from gpuhost.errors import ConfigChanged
from gpuhost.inventory.loader import load_inventory
from gpuhost.operations.vm import VmConfig, VmConfigArgs, VmGpu
from gpuhost.pve import config as pveconf
from gpuhost.runner.apply import apply, apply_plan
from gpuhost.runner.connect import open_connection, wait_for_ssh
from gpuhost.runner.context import RunnerHost
from gpuhost.templating import Templates
from tests.integration.provision.conftest import gpuhost, run_json, task

pytestmark = pytest.mark.integration

VMID = 110
CONF = f"/etc/pve/qemu-server/{VMID}.conf"


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("grub", "intel")], gpus=8, numa=2, gpu_vm=VMID)


def guest(lab, command: str):
    """A command in the VM's guest, over SSH at the address the inventory gives it."""
    import paramiko

    vm = load_inventory(lab.inventory).nodes["pve1"].vms[VMID]
    assert vm.address is not None
    wait_for_ssh("guest", vm.address, 22, 30)  # a VM just (re)started is still booting
    client = paramiko.SSHClient()
    client.load_host_keys(str(lab.known_hosts))
    client.connect(vm.address, username="root", key_filename=str(lab.client_key), timeout=10, allow_agent=False)
    try:
        _, out, err = client.exec_command(command, timeout=30)
        return out.channel.recv_exit_status(), out.read().decode(), err.read().decode()
    finally:
        client.close()


def test_1_host_first_then_the_running_vm_gets_pending_changes(lab):
    code, report = run_json("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=vm", "--allow-reboot")
    assert code == 0, [t.get("error") for t in report["tasks"] if t["status"] == "failed"]
    seed = lab.run("pve1", f"cat {CONF}").stdout
    assert "machine" not in seed and "hostpci0: 0000:03:00\n" in seed  # the seeds' VM: i440fx, bare id
    assert lab.run("pve1", f"qm start {VMID}").rc == 0
    code, report = run_json("provision", "vm", "-i", str(lab.inventory))
    config = task(report, "pve1", f"VM {VMID}: q35, 8 GPUs")
    assert config["status"] == "changed"
    assert "renames the guest's network interface" in config["reason"] and "MAC" in config["reason"]
    restart = task(report, "pve1", "pending changes applied")
    assert restart["status"] == "skipped" and "--allow-restart" in restart["reason"]
    assert report["hosts"]["pve1"]["restart_required"] == [VMID]
    assert task(report, "pve1", "qm showcmd")["status"] == "skipped"
    text = lab.run("pve1", f"cat {CONF}").stdout
    main, pending = text.split("\n[PENDING]\n")
    assert "hostpci0: 0000:03:00\n" in main and "machine" not in main  # what runs is unchanged
    assert "machine: q35\n" in pending and "hostpci0: 0000:03:00.0,pcie=1\n" in pending
    assert "x-nv-gpudirect-clique=1" in pending
    assert "type=pc+pve0" in lab.run("pve1", f"qm showcmd {VMID}").stdout
    pend = json.loads(lab.run("pve1", f"pvesh get /nodes/pve1/qemu/{VMID}/pending --output-format json").stdout)
    assert {p["key"]: p.get("pending") for p in pend}["machine"] == "q35"


def test_2_allowed_restart_applies_and_the_guest_gets_driver_and_p2p(lab, tmp_path):
    log = tmp_path / "run.log"
    code, report = run_json("provision", "vm", "-i", str(lab.inventory), "--allow-restart", "--log", str(log))
    assert code == 0, [t.get("error") for t in report["tasks"] if t["status"] == "failed"]
    # the installer downloaded inside the guest shows curl's bytes and rate, as on the host
    assert task(report, "pve1", "installer cached")["status"] == "changed"
    done = r"\[pve1/vm110\] driver download: [\d.]+ (B|KiB|MiB) downloaded, [\d.]+ (B|KiB|MiB|GiB)/s average \(\d+ s\)"
    assert re.search(done, log.read_text()), log.read_text()
    assert task(report, "pve1", "pending changes applied")["status"] == "changed"
    proof = task(report, "pve1", "qm showcmd")
    assert proof["status"] == "ok" and "8 vfio-pci GPUs on PCIe root ports" in proof["reason"]
    text = lab.run("pve1", f"cat {CONF}").stdout
    assert "[PENDING]" not in text and "machine: q35\n" in text and "cpu: host\n" in text
    for i in range(8):
        assert f"hostpci{i}: 0000:" in text and ".0,pcie=1\n" in text.split(f"hostpci{i}: ")[1].split("\n")[0] + "\n"
    cmd = lab.run("pve1", f"qm showcmd {VMID} --pretty").stdout
    words = shlex.split(cmd.replace("\\\n", " "))
    sets = [words[i + 1] for i, w in enumerate(words) if w == "-set"]
    assert sets == [f"device.hostpci{i}.x-nv-gpudirect-clique={i // 4}" for i in range(8)]
    vfio = [w for w in words if w.startswith("vfio-pci,")]
    assert len(vfio) == 8 and all(",bus=ich9-pcie-port-" in w and ",id=hostpci" in w for w in vfio)
    assert "kvm=off" not in cmd and "type=q35+pve0" in cmd
    assert task(report, "pve1", "with kernel modules (DKMS)")["status"] == "changed"
    p2p = task(report, "pve1", "P2P between its 8 GPUs")
    assert p2p["status"] == "ok" and "P2P available on all 24 GPU pairs that share a clique" in p2p["reason"]
    rc, out, _ = guest(lab, "nvidia-smi -L | wc -l; nvidia-smi topo -p2p r; systemctl is-active nvidia-persistenced")
    assert rc == 0 and out.split()[0] == "8" and out.strip().endswith("active")
    assert "\tOK\t" in out and "CNS" in out  # cliques per NUMA node: across sockets stays off
    code, again = run_json("provision", "vm", "-i", str(lab.inventory))
    assert code == 0 and again["hosts"]["pve1"]["changed"] == 0, [t for t in again["tasks"] if t["status"] != "ok"]


def test_3_the_unfixed_vm_reports_p2p_off_and_why(lab):
    seed_values = "--machine pc --cpu x86-64-v2-AES --delete args " + " ".join(
        f"--hostpci{i} {b}"
        for i, b in enumerate(
            [
                "0000:03:00",
                "0000:04:00",
                "0000:23:00",
                "0000:24:00",
                "0000:83:00",
                "0000:84:00",
                "0000:a3:00",
                "0000:a4:00",
            ]
        )
    )
    assert lab.run("pve1", f"qm set {VMID} {seed_values} && qm stop {VMID} && qm start {VMID}").rc == 0
    rc, out, _ = guest(lab, "nvidia-smi topo -p2p r")
    assert rc == 0 and "OK" not in out.split("Legend")[0] and "CNS" in out
    code, report = run_json("provision", "vm", "-i", str(lab.inventory), "--tags", "p2p")
    failed = task(report, "pve1", "P2P between its 8 GPUs")
    assert code != 0 and failed["status"] == "failed"
    error = failed["error"]
    assert "P2P unavailable" in error and "CNS" in error
    assert "machine is pc (i440fx)" in error and "hostpci0 has no pcie=1" in error and "no GPUDirect clique" in error


def test_4_q35_and_pcie_without_the_clique_is_chipset_not_supported(lab):
    code, report = run_json("provision", "vm", "-i", str(lab.inventory), "--allow-restart")
    assert code == 0, [t.get("error") for t in report["tasks"] if t["status"] == "failed"]
    assert lab.run("pve1", f"qm set {VMID} --delete args && qm stop {VMID} && qm start {VMID}").rc == 0
    code, report = run_json("provision", "vm", "-i", str(lab.inventory), "--tags", "p2p")
    error = task(report, "pve1", "P2P between its 8 GPUs")["error"]
    assert "CNS (chipset not supported)" in error and "hostpci0 has no GPUDirect clique" in error
    assert "pcie=1" not in error.split("running configuration:")[1]


def test_5_a_concurrent_edit_is_kept(lab):
    inv = load_inventory(lab.inventory)
    node = inv.nodes["pve1"]
    host = RunnerHost(node, inv.vars_for("pve1"), Templates(), check=False, connect=open_connection)
    try:
        gpus = [VmGpu(pci="0000:03:00.0", clique=0), VmGpu(pci="0000:04:00.0", clique=0)]
        conf = pveconf.parse(lab.run("pve1", f"cat {CONF}").stdout, "qemu")
        operation = VmConfig(VmConfigArgs(vmid=VMID, gpus=gpus, options={"cores": "16"}))
        plan = operation.plan(host)
        (call,) = plan.actions
        assert isinstance(call, PveCall) and call.digest == conf.digest
        assert lab.run("pve1", f"qm set {VMID} --description 'edited by someone else'").rc == 0
        # qemu-server refuses the stale digest ("checksum mismatch (file change by other user?)"): the call
        # alone fails as a changed config, and the runner re-plans once from the new file
        with pytest.raises(ConfigChanged):
            apply(host, call)
        host.invalidate_facts()
        apply_plan(host, operation.plan(host), lambda: operation.plan(host))
        after = lab.run("pve1", f"cat {CONF}").stdout
        assert "#edited by someone else" in after and "cores: 16" in after
    finally:
        host.close()


def test_6_token_only_node_fails_early_naming_pves_rule(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "nodes:\n  pve1:\n    address: 127.0.0.9\n    connection: api\n"
        "    api: {url: 'https://127.0.0.9:8006', token_id: 'root@pam!x', token_secret_env: TOK}\n"
        "    vms:\n      110: {gpus: all}\n"
    )
    r = gpuhost("provision", "vm", "-i", str(inv))
    assert r.returncode == 2, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "inv.yml:" in out and "only root can set 'args' config" in out and "root@pam" in out
