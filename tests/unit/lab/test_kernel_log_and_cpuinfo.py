from __future__ import annotations

from gpuhost.lab import kernel_log
from gpuhost.lab.cpuinfo import rebadge

HOST = (
    "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
    "model name\t: Intel(R) Xeon(R)\nflags\t\t: fpu vme vmx sse\n\n"
)


def test_cpuinfo_is_rebadged_with_the_vendor_and_its_virtualisation_flag() -> None:
    amd = rebadge(HOST, "amd")
    assert "vendor_id\t: AuthenticAMD" in amd and "model name\t: AMD EPYC 9554 64-Core Processor" in amd
    assert "flags\t\t: fpu vme sse svm" in amd and "vmx" not in amd


def test_amd_iommu_passthrough_and_the_rejected_on_option() -> None:
    log = kernel_log.render("6.8.12-4-pve", "Linux version x", "BOOT_IMAGE=/x quiet iommu=pt amd_iommu=on", "amd")
    assert "AMD-Vi: Unknown option - 'on'" in log
    assert "iommu: Default domain type: Passthrough (set via kernel command line)" in log


def test_default_domain_is_translated_without_iommu_pt_and_absent_when_off() -> None:
    assert "iommu: Default domain type: Translated" in kernel_log.render("k", "v", "quiet", "intel")
    off = kernel_log.render("k", "v", "quiet intel_iommu=off", "intel")
    assert "DMAR: IOMMU disabled" in off and "Default domain" not in off
