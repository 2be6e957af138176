"""The GPU part of a VM config: what gpuhost wants, the lints that refuse, and rewrites of real captured
configs that change only the keys gpuhost owns (applied the way PVE applies a PUT)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.checks.vm import cmdline_findings
from gpuhost.core.actions import PveCall
from gpuhost.errors import OperationFailed
from gpuhost.facts.pve import node_name
from gpuhost.facts.vm import vm_config, vm_status
from gpuhost.lab.node import pending as pve_pending
from gpuhost.operations.vm import VmConfig, VmConfigArgs, VmGpu
from gpuhost.pve import config as pveconf
from gpuhost.pve import vm_gpu
from gpuhost.pve.vm_gpu import GpuRef, VmWant

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "pve" / "qemu-server"
OWNED = {"machine", "cpu", "args", "bios", "efidisk0"}

# The seeds' starting point: i440fx, hostpciN without pcie=1 (bare BDFs, so all functions), no clique.
SEED = "".join(
    [
        "boot: order=scsi0\n",
        "cores: 64\n",
        *(f"hostpci{i}: 0000:{b}:00\n" for i, b in enumerate(["01", "11", "21", "31", "81", "91", "a1", "b1"])),
        "memory: 524288\n",
        "name: glm5\n",
        "net0: virtio=BC:24:11:00:00:01,bridge=vmbr0\n",
        "ostype: l26\n",
        "scsi0: local-lvm:vm-100-disk-0,size=512G\n",
    ]
)
BUSES = ["01", "11", "21", "31", "81", "91", "a1", "b1"]


def gpus(cliques: list[int | None] | None = None) -> tuple[GpuRef, ...]:
    cl = cliques or [0, 0, 0, 0, 1, 1, 1, 1]
    return tuple(GpuRef(pci=f"0000:{b}:00.0", clique=c) for b, c in zip(BUSES, cl, strict=True))


def test_seed_vm_becomes_q35_with_pcie_and_cliques():
    current = pveconf.parse(SEED, "qemu").main.options
    want = vm_gpu.wanted(current, VmWant(gpus=gpus()))
    assert want.values["machine"] == "q35"
    assert want.values["cpu"] == "host"
    for i, b in enumerate(BUSES):
        assert want.values[f"hostpci{i}"] == f"0000:{b}:00.0,pcie=1"  # same index, '.0' added, pcie=1
    args = want.values["args"]
    assert args is not None
    assert args.split(" -set ")[0] == "-set device.hostpci0.x-nv-gpudirect-clique=0"
    assert "-set device.hostpci7.x-nv-gpudirect-clique=1" in args
    assert any("renames the guest's network interface" in n and "MAC" in n for n in want.notes)
    after = vm_gpu.merged(current, want.values)
    assert vm_gpu.lint(after) == []
    assert vm_gpu.wanted(after, VmWant(gpus=gpus())).values == {}  # idempotent


def test_pinned_q35_version_and_other_args_are_kept():
    current = {
        "machine": "pc-q35-8.1,viommu=virtio",
        "args": "-cpu host,+invtsc -set device.hostpci0.x-nv-gpudirect-clique=3",
        "hostpci0": "41:00.0,pcie=1,rombar=0",
    }
    want = vm_gpu.wanted(current, VmWant(gpus=(GpuRef(pci="0000:41:00.0", clique=0),)))
    assert "machine" not in want.values
    assert want.values["args"] == "-cpu host,+invtsc -set device.hostpci0.x-nv-gpudirect-clique=0"
    assert "hostpci0" not in want.values  # already .0 and pcie=1; rombar=0 is the user's


def test_i440fx_machine_keeps_its_properties_and_says_the_pin_goes():
    want = vm_gpu.wanted({"machine": "pc-i440fx-8.1,viommu=intel"}, VmWant(gpus=()))
    assert want.values["machine"] == "q35,viommu=intel"
    assert any("pc-i440fx-8.1" in n for n in want.notes)


def test_new_gpus_take_free_indices_next_to_other_devices():
    current = {"machine": "q35", "hostpci0": "0000:05:00.0,pcie=1", "hostpci1": "0000:41:00.0"}
    want = vm_gpu.wanted(current, VmWant(gpus=(GpuRef(pci="0000:41:00.0", clique=0), GpuRef(pci="0000:c1:00.0"))))
    assert "hostpci0" not in want.values  # the NIC stays
    assert want.values["hostpci1"] == "0000:41:00.0,pcie=1"
    assert want.values["hostpci2"] == "0000:c1:00.0,pcie=1"


def test_clique_opt_out_removes_only_clique_words():
    current = {
        "machine": "q35",
        "hostpci0": "0000:41:00.0,pcie=1",
        "args": "-set device.hostpci0.x-nv-gpudirect-clique=0",
    }
    want = vm_gpu.wanted(current, VmWant(gpus=(GpuRef(pci="0000:41:00.0"),)))
    assert want.values["args"] is None  # deleted: nothing else was in it


def test_mapping_gpu():
    want = vm_gpu.wanted({"machine": "q35"}, VmWant(gpus=(GpuRef(mapping="gpu0", clique=0),)))
    assert want.values["hostpci0"] == "mapping=gpu0,pcie=1"


# ---- each lint --------------------------------------------------------------------------------


def one(problems: list[str], *words: str) -> None:
    assert len(problems) == 1, problems
    for w in words:
        assert w in problems[0], problems[0]


def test_lint_pcie_without_q35():
    one(vm_gpu.lint({"machine": "pc", "hostpci0": "0000:41:00.0,pcie=1"}), "hostpci0", "pcie=1", "q35")
    one(vm_gpu.lint({"hostpci0": "0000:41:00.0,pcie=1"}), "needs the q35")


def test_lint_clique_on_an_id_without_function():
    opts = {"machine": "q35", "hostpci0": "0000:41:00,pcie=1", "args": "-set device.hostpci0.x-nv-gpudirect-clique=0"}
    one(vm_gpu.lint(opts), "hostpci0", "'.0'", "hostpci0.0")


@pytest.mark.parametrize(
    ("extra", "word"),
    [({"hostpci0": "0000:41:00.0,pcie=1,x-vga=1"}, "x-vga=1"), ({"cpu": "host,hidden=1"}, "hidden=1")],
)
def test_lint_kvm_off_with_a_clique(extra, word):
    opts = {"machine": "q35", "hostpci0": "0000:41:00.0,pcie=1", "args": "-set device.hostpci0.x-nv-gpudirect-clique=0"}
    one(vm_gpu.lint({**opts, **extra}), word, "kvm=off")
    assert vm_gpu.lint({**opts, **extra, "args": "-no-reboot"}) == []  # without a clique it is the user's choice


def test_lint_more_than_16_hostpci():
    opts = {"machine": "q35", **{f"hostpci{i}": f"0000:{i + 1:02x}:00.0,pcie=1" for i in range(17)}}
    one(vm_gpu.lint(opts), "17 entries", "at most 16")


def test_lint_clique_outside_0_15():
    opts = {
        "machine": "q35",
        "hostpci0": "0000:41:00.0,pcie=1",
        "args": "-set device.hostpci0.x-nv-gpudirect-clique=16",
    }
    one(vm_gpu.lint(opts), "=16", "outside 0-15")


def test_lint_ovmf_without_efidisk():
    one(vm_gpu.lint({"machine": "q35", "bios": "ovmf"}), "efidisk0", "EFI Disk")
    assert vm_gpu.lint({"machine": "q35", "bios": "ovmf", "efidisk0": "local-lvm:vm-100-disk-1,size=4M"}) == []


def test_more_than_16_gpus_are_refused_by_the_operation():
    many = [VmGpu(pci=f"0000:{i + 1:02x}:00.0", clique=0) for i in range(17)]
    host = FakeHost({vm_config: pveconf.parse("machine: q35\n", "qemu")})
    with pytest.raises(OperationFailed, match="nothing was changed"):
        VmConfig(VmConfigArgs(vmid=100, gpus=many)).plan(host)


# ---- the operation: one PUT with the digest, root-only keys in it -------------------------------


class FakeHost:
    name = "pve1"
    vars: dict[str, object] = {}
    check = False
    reboot_pending = False

    def __init__(self, facts: dict[object, object]) -> None:
        self.facts = {node_name: "pve1", vm_status: "stopped", **facts}

    def restart_pending(self, guest: object) -> bool:
        return False

    def fact(self, fact: object, *args: object) -> object:
        return self.facts[fact]


def seed_args() -> VmConfigArgs:
    return VmConfigArgs(vmid=100, gpus=[VmGpu(pci=g.pci, clique=g.clique) for g in gpus()])


def test_plan_is_one_put_with_the_config_digest():
    conf = pveconf.parse(SEED, "qemu")
    plan = VmConfig(seed_args()).plan(FakeHost({vm_config: conf}))
    (call,) = plan.actions
    assert isinstance(call, PveCall) and call.method == "put" and call.path == "nodes/pve1/qemu/100/config"
    params = dict(call.params)
    # the digest rides in PveCall.digest (the runner adds it and re-plans on qemu-server's stale-digest answer)
    assert call.digest == pveconf.digest_of(SEED) and "digest" not in params
    assert params["machine"] == "q35" and "args" in params and params["hostpci3"] == "0000:31:00.0,pcie=1"
    assert "+machine: q35" in plan.diff and "-hostpci0: 0000:01:00" in plan.diff
    assert "NOTE: machine pc -> q35 renames" in plan.reason


def test_plan_with_the_change_already_pending_changes_nothing():
    conf = pveconf.parse(SEED, "qemu")
    conf_after = apply_put(SEED, VmConfig(seed_args()).plan(FakeHost({vm_config: conf})), running=True)
    assert "[PENDING]" in conf_after
    plan = VmConfig(seed_args()).plan(FakeHost({vm_config: pveconf.parse(conf_after, "qemu"), vm_status: "running"}))
    assert not plan.changes
    assert vm_gpu.pending_keys(pveconf.parse(conf_after, "qemu"))[:2] == ["args", "cpu"]


def apply_put(text: str, plan: object, running: bool = False) -> str:
    """What PVE does with the plan's PUT (the lab's implementation of qemu-server's pending logic)."""
    (call,) = plan.actions  # type: ignore[attr-defined]
    params = dict(call.params)
    deletes = [(k, False) for k in params.pop("delete", "").split(",") if k]
    conf = pveconf.parse(text, "qemu")
    pve_pending.stage(conf, params, deletes, [], delete_drops_pending=True)
    if running:
        pve_pending.apply(conf, lambda key: False)
    else:
        pve_pending.apply(conf)
    return conf.render()


# ---- real captured configs: only gpuhost's keys change ----------------------------------------

#: captures the lints refuse, each with its own test (test_vm_round2.py)
REFUSED = {"201-guide-slot-and-its-function-twice.conf", "vmid-rocm-guide-slot-and-its-audio-function-twice.conf"}
CAPTURED = sorted(p.name for p in FIX.glob("*.conf") if p.name not in REFUSED)


@pytest.mark.parametrize("name", CAPTURED)
def test_real_config_changes_only_owned_keys(name):
    text = (FIX / name).read_text()
    before = pveconf.parse(text, "qemu")
    want = [VmGpu(pci="0000:41:00.0", clique=0), VmGpu(pci="0000:c1:00.0", clique=1)]
    host = FakeHost({vm_config: before})
    # the lints accept every capture here; a refusal fails this test instead of skipping it (a capture that
    # must be refused gets a test of its own naming the reason)
    plan = VmConfig(VmConfigArgs(vmid=100, gpus=want)).plan(host)
    after = pveconf.parse(apply_put(text, plan), "qemu")
    eff_before = vm_gpu.effective(before)
    changed = {k for k in set(eff_before) | set(after.main.options) if eff_before.get(k) != after.main.options.get(k)}
    assert changed, "the GPUs were not added"
    assert all(k in OWNED or k.startswith("hostpci") for k in changed), changed
    # snapshots, special sections and descriptions are kept as they were
    assert {n: s.options for n, s in after.snapshots.items()} == {n: s.options for n, s in before.snapshots.items()}
    assert {n: s.options for n, s in after.specials.items()} == {n: s.options for n, s in before.specials.items()}
    assert after.main.description == before.main.description
    for k, v in vm_gpu.hostpci_entries(eff_before).items():  # other devices keep index and value
        if not any(vm_gpu.slot(i) in ("0000:41:00", "0000:c1:00") for i in vm_gpu.hostpci_ids(v)):
            assert after.main.options[f"hostpci{k}"] == v


def test_captured_pve_hostpci_config_keeps_other_devices():
    text = (FIX / "8006-q35-linux-hostpci-driver-keep.conf").read_text()
    conf = pveconf.parse(text, "qemu")
    plan = VmConfig(VmConfigArgs(vmid=100, gpus=[VmGpu(pci="0000:d0:17.0", clique=0)])).plan(
        FakeHost({vm_config: conf})
    )
    params = dict(plan.actions[0].params)  # type: ignore[union-attr]
    assert "hostpci4" not in params  # d0:17.0,pcie=1,rombar=0 already right
    assert params["args"] == "-set device.hostpci4.x-nv-gpudirect-clique=0"
    after = apply_put(text, plan)
    # the comment is the description; PVE's writer percent-encodes its ':' (encode_text), as here
    assert after.splitlines()[0] == "# TEST%3A Config with q35, NUMA, hostpci passthrough, EFI & Linux & driver option"
    assert pveconf.parse(after, "qemu").main.description == conf.main.description
    assert "hostpci0: 00:ff.1,driver=keep\n" in after and "hostpci7: d0:15.2,pcie=1\n" in after


OPTS = {"hostpci0": "0000:41:00.0,pcie=1"}


# ---- qm showcmd --------------------------------------------------------------------------------


def test_showcmd_proof_names_what_is_missing():
    text = (
        "/usr/bin/kvm -id 100 -cpu 'kvm64,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,kvm=off' "
        "-device 'vfio-pci,host=0000:41:00.0,id=hostpci0.0,bus=pci.0,addr=0x10.0,multifunction=on' "
        "-machine 'type=pc+pve0'"
    )
    found = cmdline_findings(vm_gpu.parse_showcmd(text), OPTS, (GpuRef(pci="0000:41:00.0", clique=0),), "VM 100")
    problems = [f.message for f in found if f.failed]
    # issue 30: the multifunction hostpci0.0 on pci.0 is not on a PCIe root port either (it passed vacuously)
    assert {f.check for f in found if f.failed} == {"vm.q35", "vm.no_kvm_off", "vm.functions", "vm.cliques", "vm.pcie"}
    assert any("not q35" in p for p in problems)
    assert any("kvm=off" in p for p in problems)
    assert any("id=hostpci0'" in p and "multifunction" in p for p in problems)


def test_showcmd_proof_passes():
    text = (
        "/usr/bin/kvm \\\n  -id 100 \\\n  -cpu 'host,+kvm_pv_eoi,+kvm_pv_unhalt' \\\n"
        "  -device 'vfio-pci,host=0000:41:00.0,id=hostpci0,bus=ich9-pcie-port-1,addr=0x0' \\\n"
        "  -machine 'type=q35+pve0' \\\n  -set device.hostpci0.x-nv-gpudirect-clique=0"
    )
    found = cmdline_findings(vm_gpu.parse_showcmd(text), OPTS, (GpuRef(pci="0000:41:00.0", clique=0),), "VM 100")
    assert [f for f in found if f.failed] == [] and len(found) == 5


def test_showcmd_proof_names_a_missing_clique_and_a_plain_pci_bus():
    text = (
        "/usr/bin/kvm -id 100 -cpu host "
        "-device 'vfio-pci,host=0000:41:00.0,id=hostpci0,bus=pci.0,addr=0x10' -machine 'type=q35+pve0'"
    )
    found = cmdline_findings(vm_gpu.parse_showcmd(text), OPTS, (GpuRef(pci="0000:41:00.0", clique=0),), "VM 100")
    failed = {f.check: f.message for f in found if f.failed}
    assert failed == {
        "vm.pcie": "hostpci0 sits on pci.0, not on a PCIe root port (pcie=1)",
        "vm.cliques": "no '-set device.hostpci0.x-nv-gpudirect-clique=0'",
    }


def test_p2p_blockers_name_the_missing_pieces():
    seed = pveconf.parse(SEED, "qemu").main.options
    blockers = vm_gpu.p2p_blockers(seed)
    assert blockers[0].startswith("machine is pc (i440fx)")
    assert "hostpci0 has no pcie=1" in blockers and any("no GPUDirect clique" in b for b in blockers)
