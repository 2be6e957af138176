"""The classic mistake: iommu=pt in /etc/default/grub on a systemd-boot host. gpuhost explains it."""

import pytest

from tests.integration.provision.conftest import gpuhost, run_json, task

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("systemd-boot", "amd")])


def test_edit_of_the_wrong_file_is_diagnosed_then_fixed(lab, tmp_path):
    lab.run(
        "pve1",
        "sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iommu=pt amd_iommu=on\"/'"
        " /etc/default/grub && update-grub >/dev/null 2>&1; true",
    )
    boots = lab.boots("pve1")
    lab.run("pve1", "nohup sh -c 'sleep 0.5; reboot' >/dev/null 2>&1 &")
    lab.wait_rebooted("pve1", boots)
    assert "iommu=pt" not in lab.run("pve1", "cat /proc/cmdline").stdout, "the lab must ignore the wrong file"

    book = tmp_path / "verify.yml"
    book.write_text("- hosts: all\n  tasks:\n    - verify: {host: {cmdline: [iommu=pt, amd_iommu=on]}}\n")
    r = gpuhost("run", str(book), "-i", str(lab.inventory))
    assert r.returncode == 1
    assert "is in /etc/default/grub, but this host boots with systemd-boot, which reads /etc/kernel/cmdline" in r.stdout

    code, report = run_json("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=none", "--allow-reboot")
    assert code == 0, report
    edit = task(report, "pve1", "IOMMU on the kernel command line")
    assert edit["status"] == "changed" and "/etc/kernel/cmdline" in edit["reason"]
    assert "iommu=pt" in lab.run("pve1", "cat /proc/cmdline").stdout
