"""qm behaves as PVE's does for what gpuhost uses (format, pending, showcmd, exit codes)."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

from gpuhost.pve import config as pveconf
from gpuhost.pve.guest_lists import QmRow, qm_rows
from tests.lab_fixtures import LabHandle

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cluster"

_VMIDS = itertools.count(400)


def _new_vm(lab: LabHandle, node: str, extra: str = "") -> int:
    vmid = next(_VMIDS)
    r = lab.run(
        node,
        f"qm create {vmid} --name vm{vmid} --memory 2048 --cores 2 --sockets 1 "
        f"--net0 virtio=BC:24:11:00:00:01,bridge=vmbr0 {extra}",
    )
    assert r.rc == 0, r.stderr
    return vmid


def test_seed_vm_is_i440fx_without_passthrough(lab: LabHandle) -> None:
    cfg = lab.run("pve1", "qm config 100").stdout
    assert "machine:" not in cfg and "hostpci" not in cfg and "args:" not in cfg
    assert "-machine 'type=pc+pve0'" in lab.run("pve1", "qm showcmd 100").stdout


def test_set_writes_pve_format_sorted_with_digest(lab: LabHandle) -> None:
    vmid = _new_vm(lab, "pve1")
    r = lab.run("pve1", f"qm set {vmid} --machine q35 --bios ovmf --hostpci0 0000:01:00.0,pcie=1")
    assert r.rc == 0 and r.stdout.strip() == f"update VM {vmid}: -machine q35 -bios ovmf -hostpci0 0000:01:00.0,pcie=1"
    raw = lab.run("pve1", f"cat /etc/pve/qemu-server/{vmid}.conf").stdout
    keys = [line.split(":", 1)[0] for line in raw.splitlines()]
    assert keys == sorted(keys)
    assert "hostpci0: 0000:01:00.0,pcie=1" in raw.splitlines()
    digest = lab.run("pve1", f"pvesh get /nodes/pve1/qemu/{vmid}/config --output-format json").stdout
    assert hashlib.sha1(raw.encode()).hexdigest() in digest


def test_stale_digest_is_refused(lab: LabHandle) -> None:
    vmid = _new_vm(lab, "pve1")
    r = lab.run("pve1", f"qm set {vmid} --memory 4096 --digest 0000000000000000000000000000000000000000")
    assert r.rc == 255
    # qemu-server's own text (API2/Qemu.pm:2211-2212), not pve-common's assert_if_modified that containers use
    assert r.stderr == "checksum mismatch (file change by other user?)\n"


def test_changes_to_a_running_vm_stay_pending_until_a_cold_start(lab: LabHandle) -> None:
    vmid = _new_vm(lab, "pve1")
    assert lab.run("pve1", f"qm start {vmid}").rc == 0
    assert lab.run("pve1", f"qm status {vmid}").stdout == "status: running\n"
    r = lab.run("pve1", f"qm set {vmid} --machine q35 --name renamed --delete sockets,net0")
    assert r.rc == 0, r.stderr
    raw = lab.run("pve1", f"cat /etc/pve/qemu-server/{vmid}.conf").stdout
    main, _, pending = raw.partition("\n[PENDING]\n")
    assert "name: renamed" in main and "net0" not in main  # hot-pluggable: applied at once
    assert "machine: q35" in pending and "delete: sockets" in pending
    assert "type=pc+pve0" in lab.run("pve1", f"qm showcmd {vmid}").stdout  # the running config
    pend = lab.run("pve1", f"qm pending {vmid}").stdout.splitlines()
    assert "new machine: q35" in pend and "del sockets: 1" in pend
    assert lab.run("pve1", f"qm start {vmid}").stderr == f"VM {vmid} already running\n"
    assert lab.run("pve1", f"qm stop {vmid} && qm start {vmid}").rc == 0
    raw = lab.run("pve1", f"cat /etc/pve/qemu-server/{vmid}.conf").stdout
    assert "[PENDING]" not in raw and "machine: q35" in raw and "sockets" not in raw
    assert "type=q35+pve0" in lab.run("pve1", f"qm showcmd {vmid}").stdout
    assert lab.run("pve1", f"qm stop {vmid}").rc == 0


def test_snapshot_sections_and_description_survive_qm_set(lab: LabHandle) -> None:
    r = lab.run("pve1", "qm set 302 --cores 8 && cat /etc/pve/qemu-server/302.conf")
    assert r.rc == 0, r.stderr
    parsed = pveconf.parse(r.stdout.split("\n", 1)[1], "qemu")
    assert parsed.get("cores") == "8"
    snap = parsed.snapshots["test"]
    assert snap.description == "test comment" and snap.options["vmstate"] == "somestorage:state-volume"
    assert "\n[test]\n#test comment\nagent: 1\n" in r.stdout


def test_showcmd_renders_vfio_devices_kvm_off_and_args(lab: LabHandle) -> None:
    vmid = _new_vm(lab, "pve1", "--machine q35")
    lab.run(
        "pve1",
        f"qm set {vmid} --hostpci0 0000:41:00.0,pcie=1 --hostpci5 0000:c1:00.0,pcie=1 "
        f"--args '-set device.hostpci0.x-nv-gpudirect-clique=0'",
    )
    out = lab.run("pve1", f"qm showcmd {vmid} --pretty").stdout
    assert "  -device 'vfio-pci,host=0000:41:00.0,id=hostpci0,bus=ich9-pcie-port-1,addr=0x0' \\\n" in out
    assert "pcie-root-port,id=ich9-pcie-port-6" in out and "id=hostpci5,bus=ich9-pcie-port-6" in out
    assert "-machine 'type=q35+pve0' \\\n  -set 'device.hostpci0.x-nv-gpudirect-clique=0'" in out
    assert "kvm=off" not in out
    lab.run("pve1", f"qm set {vmid} --hostpci0 0000:41:00.0,pcie=1,x-vga=1")
    assert "+kvm_pv_unhalt,kvm=off'" in lab.run("pve1", f"qm showcmd {vmid}").stdout
    lab.run("pve1", f"qm set {vmid} --hostpci0 0000:41:00.0,pcie=1 --cpu host,hidden=1")
    assert "-cpu 'host,+kvm_pv_eoi,+kvm_pv_unhalt,kvm=off'" in lab.run("pve1", f"qm showcmd {vmid}").stdout


def test_showcmd_multifunction_device_gets_dotted_ids(lab: LabHandle) -> None:
    vmid = _new_vm(lab, "pve3", "--machine q35")
    lab.run("pve3", f"qm set {vmid} --hostpci0 0000:01:00,pcie=1")
    missing = lab.run("pve3", f"qm showcmd {vmid}")
    assert (missing.rc, missing.stderr) == (255, "no PCI device found for '0000:01:00'\n")
    # give the node a two-function device in its own mount namespace (later parts simulate GPUs)
    out = lab.run(
        "pve3",
        "mount -t tmpfs fakepci /sys/bus/pci/devices && "
        "mkdir /sys/bus/pci/devices/0000:01:00.0 /sys/bus/pci/devices/0000:01:00.1 && "
        f"qm showcmd {vmid}; umount /sys/bus/pci/devices",
    ).stdout
    assert "'vfio-pci,host=0000:01:00.0,id=hostpci0.0,bus=ich9-pcie-port-1,addr=0x0.0,multifunction=on'" in out
    assert "'vfio-pci,host=0000:01:00.1,id=hostpci0.1,bus=ich9-pcie-port-1,addr=0x0.1'" in out


def test_start_refuses_a_missing_pci_device(lab: LabHandle) -> None:
    vmid = _new_vm(lab, "pve1", "--machine q35")
    lab.run("pve1", f"qm set {vmid} --hostpci0 0000:e1:00.0,pcie=1")
    r = lab.run("pve1", f"qm start {vmid}")
    assert (r.rc, r.stderr) == (255, "no PCI device found for '0000:e1:00.0'\n")
    assert lab.run("pve1", f"qm status {vmid}").stdout == "status: stopped\n"


def test_running_vm_process_carries_its_command_line(lab: LabHandle) -> None:
    vmid = _new_vm(lab, "pve1", "--cpu host,hidden=1")
    lab.run("pve1", f"qm start {vmid}")
    r = lab.run("pve1", f"ps -o args= -p $(cat /var/run/qemu-server/{vmid}.pid)")
    assert f"/usr/bin/kvm -id {vmid} " in r.stdout and "kvm=off" in r.stdout
    lab.run("pve1", f"qm shutdown {vmid}")
    r = lab.run("pve1", f"qm shutdown {vmid}")
    assert (r.rc, r.stderr) == (255, f"VM {vmid} not running\n")


def test_errors_and_exit_codes(lab: LabHandle) -> None:
    r = lab.run("pve1", "qm config 999")
    assert (r.rc, r.stderr) == (2, "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist\n")
    r = lab.run("pve1", "qm set 100 --bogus 1")
    assert r.rc == 255 and r.stderr.startswith("Unknown option: bogus\n400 unable to parse option\n")
    r = lab.run("pve1", "qm set 100 --memory lots")
    assert r.rc == 255 and "memory: type check ('integer') failed - got 'lots'" in r.stderr
    r = lab.run("pve1", "qm set 100 --hostpci1 pcie=1")
    assert r.rc == 255 and "400 Parameter verification failed." in r.stderr


def test_list_prints_what_qm_list_prints(lab: LabHandle) -> None:
    """The header and the columns of a real ``qm list`` (tests/fixtures/cluster/qm-list/), the boot disk's size."""
    vmid = _new_vm(lab, "pve1")
    r = lab.run("pve1", f"qm set {vmid} --scsi0 local-lvm:vm-{vmid}-disk-0,size=32G --boot 'order=scsi0;net0'")
    assert r.rc == 0, r.stderr
    out = lab.run("pve1", "qm list").stdout.splitlines()
    real = (CAPTURES / "qm-list" / "ovh1-two-running.txt").read_text().splitlines()
    assert out[0] == real[0]  # trailing spaces and all
    rows = {r.vmid: r for r in qm_rows("\n".join(out))}
    assert rows[vmid] == QmRow(vmid, f"vm{vmid}", "stopped", 2048, 32.0, 0)
    assert f"{vmid:>10} vm{vmid:<18} stopped    2048              32.00 0         " in out
    assert len(rows) == len(out) - 1
