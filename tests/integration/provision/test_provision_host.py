"""`gpuhost provision host` against lab nodes: GRUB and systemd-boot, AMD and Intel."""

import pytest

from tests.integration.provision.conftest import gpuhost, run_json, task

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("grub", "intel"), ("systemd-boot", "amd")])


def files(lab, node):
    r = lab.run(
        node,
        "cat /etc/default/grub; echo @@; cat /etc/kernel/cmdline 2>/dev/null; echo @@; "
        "cat /proc/cmdline; echo @@; sha256sum /etc/default/grub /etc/kernel/cmdline 2>/dev/null",
    )
    grub, kcmd, proc, sums = r.stdout.split("@@\n")
    return grub, kcmd, proc.split(), sums


def test_check_diff_changes_nothing_and_reboots_nothing(lab):
    before = {n: files(lab, n) for n in ("pve1", "pve2")}
    boots = {n: lab.boots(n) for n in ("pve1", "pve2")}
    r = gpuhost("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=none", "--check", "--diff")
    assert r.returncode == 0, r.stdout + r.stderr
    assert '+GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt intel_iommu=on"' in r.stdout
    assert "+root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt amd_iommu=on" in r.stdout
    assert {n: files(lab, n) for n in ("pve1", "pve2")} == before
    assert {n: lab.boots(n) for n in ("pve1", "pve2")} == boots


def test_without_allow_reboot_the_file_changes_but_nothing_reboots(lab):
    code, report = run_json("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=none")
    assert code == 0
    for node in ("pve1", "pve2"):
        assert report["hosts"][node]["reboot_required"] is True
        assert report["hosts"][node]["rebooted"] is False
        assert task(report, node, "reboot if")["status"] == "skipped"
        assert "--allow-reboot" in task(report, node, "reboot if")["reason"]
    grub, _, proc, _ = files(lab, "pve1")
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt intel_iommu=on"' in grub
    assert "iommu=pt" not in proc
    _, kcmd, proc2, _ = files(lab, "pve2")
    assert kcmd.split() == ["root=ZFS=rpool/ROOT/pve-1", "boot=zfs", "iommu=pt", "amd_iommu=on"]
    assert "iommu=pt" not in proc2
    refreshed = {n: task(report, n, "refresh boot loader")["reason"] for n in ("pve1", "pve2")}
    assert refreshed["pve1"].startswith("update-grub")
    assert refreshed["pve2"].startswith("proxmox-boot-tool refresh")


def test_allow_reboot_boots_with_the_tokens_then_converges(lab):
    code, report = run_json("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=none", "--allow-reboot")
    assert code == 0, report
    for node, tokens in (("pve1", ["iommu=pt", "intel_iommu=on"]), ("pve2", ["iommu=pt", "amd_iommu=on"])):
        assert report["hosts"][node]["rebooted"] is True
        proc = files(lab, node)[2]
        assert all(t in proc for t in tokens), proc
        assert task(report, node, "verify the booted host")["status"] == "ok"
    code, again = run_json("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=none", "--allow-reboot")
    assert code == 0
    for node in ("pve1", "pve2"):
        assert again["hosts"][node]["changed"] == 0
        assert again["hosts"][node]["rebooted"] is False
        # facts are read ahead in batches: a converged host costs a few round trips, not one per task
        assert again["hosts"][node]["round_trips"] <= 3, again["hosts"][node]
