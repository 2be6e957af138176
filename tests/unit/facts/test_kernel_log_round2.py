"""Kernel-log readers on real captures (tests/fixtures/host/{dmesg,nvidia}, see SOURCE.md): IOMMU DMA faults,
the driver mismatch in the kernel's own words, and GPUs the driver could not initialise; and the host checks
that turn them into findings in host wording."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuhost.checks import Level
from gpuhost.checks.host import gpu_init, iommu_faults, nvidia_api_mismatch
from gpuhost.cli.app import _register, app
from gpuhost.facts.boot import BootInfo
from gpuhost.facts.driver_failure import explain_driver_failure, parse_nvrm_api_mismatch, parse_rm_init_failures
from gpuhost.facts.hardware import NvidiaKernelModule, PciDevice, parse_dmesg_iommu
from gpuhost.facts.host import HostFacts

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "host"
_register()


def read(name: str) -> str:
    return (FIX / name).read_text()


def host(dmesg: str, *, loaded: str | None = None, gpus: tuple[PciDevice, ...] = ()) -> HostFacts:
    return HostFacts(
        cpu_vendor="amd",
        kernel="6.8.12-4-pve",
        pve_version=None,
        boot=BootInfo("grub", False, "bios", ()),
        grub_effective_tokens=None,
        kernel_cmdline_tokens=None,
        booted_tokens=(),
        iommu=parse_dmesg_iommu(dmesg),
        iommu_groups={},
        gpus=gpus,
        modules=frozenset(),
        nvidia=NvidiaKernelModule(loaded, False) if loaded else None,
        nvidia_installed=None,
        char_majors={},
        nvidia_devices=(),
        nvrm_api_mismatch=parse_nvrm_api_mismatch(dmesg),
        rm_init_failures=tuple(parse_rm_init_failures(dmesg)),
    )


# ---- IOMMU faults


@pytest.mark.parametrize(
    ("name", "vendor", "device", "count", "driver"),
    [
        ("dmesg/amd-vi-io-page-fault-nvidia-gpu-p2p-journal-excerpt.txt", "amd", "0000:07:00.0", 9, "nvidia"),
        ("dmesg/amd-vi-io-page-fault-old-format-amdgpu-excerpt.txt", "amd", "0000:20:00.0", 4, None),
        ("dmesg/intel-dmar-dma-read-no-pasid-igpu-fault.txt", "intel", "0000:00:02.0", 2, None),
        ("dmesg/intel-dmar-dma-read-old-format-pasid-fault.txt", "intel", "0000:06:00.0", 3, None),
    ],
)
def test_dma_faults_prove_a_translating_iommu(name: str, vendor: str, device: str, count: int, driver: str | None):
    state = parse_dmesg_iommu(read(name))
    assert state.enabled is True
    assert state.summary == "enabled: yes (translating)"
    assert state.vendor == vendor
    assert state.faulting_devices() == {device: count}
    assert {f.driver for f in state.faults} == {driver}


def test_intel_fault_reason_is_kept():
    state = parse_dmesg_iommu(read("dmesg/intel-dmar-dma-read-old-format-pasid-fault.txt"))
    assert {(f.kind, f.reason) for f in state.faults} == {("DMA Read", "06 PTE Read access is not set")}


def test_a_log_without_faults_still_says_what_it_proves():
    assert parse_dmesg_iommu(read("dmesg/default-domain-translated-lazy.txt")).summary == "enabled: unknown"
    assert parse_dmesg_iommu(read("dmesg/amd-perf-counters-and-iommu-groups-excerpt.txt")).summary == "enabled: yes"


def test_gpu_dma_faults_fail_the_host_check():
    f = iommu_faults(host(read("dmesg/amd-vi-io-page-fault-nvidia-gpu-p2p-journal-excerpt.txt")), "pve1")
    assert f is not None and f.level is Level.FAIL
    assert f.message == "IOMMU enabled: yes (translating): IO_PAGE_FAULT for GPU 0000:07:00.0 (9×)"
    assert f.fix and f.fix.startswith("boot the host with iommu=pt")


def test_faults_of_another_device_only_warn():
    f = iommu_faults(host(read("dmesg/intel-dmar-dma-read-no-pasid-igpu-fault.txt")), "pve1")
    assert f is not None and f.level is Level.WARN
    assert "0000:00:02.0 (2×)" in f.message and "GPU" not in f.message.split(":")[2]


def test_no_fault_no_finding():
    assert iommu_faults(host(read("dmesg/intel-dmar-ir-x2apic-excerpt.txt")), "pve1") is None


# ---- NVRM: API mismatch, however the log wrapped it


@pytest.mark.parametrize(
    ("name", "client", "module", "who"),
    [
        ("nvidia/nvrm-api-mismatch-syslog-012-joined.txt", "535.54.03", "530.30.02", None),
        ("nvidia/nvrm-api-mismatch-journal-continuation.txt", "367.44", "367.35", None),
        ("nvidia/nvrm-api-mismatch-client-name-595.txt", "595.84", "595.80", "kwin_wayland"),
        ("nvidia/nvrm-api-mismatch-vgpu-guest-dmesg-timestamps.txt", "570.148.08", "570.148.06", None),
        ("nvidia/nvrm-api-mismatch-then-rminitadapter-gsp-firmware-570.txt", "570.153.02", "570.144", None),
    ],
)
def test_api_mismatch_versions(name: str, client: str, module: str, who: str | None):
    api = parse_nvrm_api_mismatch(read(name))
    assert api is not None
    assert (api.client_version, api.module_version, api.client) == (client, module, who)


def test_explainer_reads_the_kernel_words_in_host_wording():
    failure = explain_driver_failure(read("nvidia/nvrm-api-mismatch-syslog-012-joined.txt"), where="host")
    assert failure.kind == "version-mismatch"
    assert (failure.library_version, failure.module_version) == ("535.54.03", "530.30.02")
    assert "installed NVIDIA userspace differs from the loaded kernel module" in failure.message
    assert failure.fix.startswith("the loaded kernel module is older or newer than the installed userspace: reboot")


def test_host_check_fails_on_a_live_mismatch_and_names_both_versions():
    facts = host(read("nvidia/nvrm-api-mismatch-journal-continuation.txt"), loaded="367.35")
    f = nvidia_api_mismatch(facts, "pve1")
    assert f is not None and f.level is Level.FAIL
    assert f.message == "NVRM: API mismatch: userspace 367.44, kernel module 367.35"
    assert f.fix and "reboot" in f.fix
    assert f.cause and "userspace client (367.44), kernel module (367.35)" in f.cause


def test_a_mismatch_from_before_the_module_was_reloaded_is_only_info():
    facts = host(read("nvidia/nvrm-api-mismatch-journal-continuation.txt"), loaded="367.44")
    f = nvidia_api_mismatch(facts, "pve1")
    assert f is not None and f.level is Level.INFO


# ---- RmInitAdapter failed: the cause named next to it


@pytest.mark.parametrize(
    ("name", "device", "code", "count", "cause"),
    [
        ("dmesg/nvrm-rminitadapter-d3cold-0x22-0x56-667.txt", "0000:01:00.0", "0x22:0x56:667", 2, "D3cold"),
        ("dmesg/nvrm-rminitadapter-not-ready-after-resume-d3cold.txt", "0000:01:00.0", "0x22:0x56:667", 2, "D3cold"),
        (
            "dmesg/nvrm-rminitadapter-gsp-wpr2-already-up.txt",
            "0000:a1:00.0",
            "0x62:0x40:2168",
            1,
            "GSP firmware did not",
        ),
        (
            "nvidia/nvrm-api-mismatch-then-rminitadapter-gsp-firmware-570.txt",
            "0000:07:00.0",
            "0x61:0x56:1770",
            1,
            "nvidia/570.144/gsp_ga10x.bin is missing",
        ),
        ("dmesg/nvrm-rminitadapter-syslog-0x24-0x72-1568.txt", "0000:0a:00.0", "0x24:0x72:1568", 2, "could not"),
    ],
)
def test_rm_init_failures(name: str, device: str, code: str, count: int, cause: str):
    (failure,) = parse_rm_init_failures(read(name))
    assert (failure.device, failure.code, failure.count) == (device, code, count)
    assert cause in failure.cause


def test_d3cold_fix_turns_runtime_power_management_off_for_that_gpu():
    facts = host(read("dmesg/nvrm-rminitadapter-d3cold-0x22-0x56-667.txt"))
    (f,) = gpu_init(facts, "pve1")
    assert f.level is Level.FAIL and f.subject == "pve1 0000:01:00.0"
    assert f.fix and "echo on > /sys/bus/pci/devices/0000:01:00.0/power/control" in f.fix


def test_every_capture_used_here_is_in_the_corpus_index():
    index = (FIX / "SOURCE.md").read_text()
    used = [p for p in FIX.glob("*/*") if p.name.startswith(("nvrm-", "amd-vi-io-page-fault", "intel-dmar-dma-read"))]
    assert len(used) == 13
    for p in used:
        assert f"`{p.name}`" in index, p.name


# ---- gpuhost doctor dmesg


def test_doctor_dmesg_on_a_gpu_fault_log_exits_1_with_the_iommu_state():
    r = CliRunner().invoke(
        app, ["doctor", "dmesg", str(FIX / "dmesg/amd-vi-io-page-fault-nvidia-gpu-p2p-journal-excerpt.txt")]
    )
    assert r.exit_code == 1, r.output
    assert r.output.splitlines()[0] == "IOMMU enabled: yes (translating) (amd)"
    assert "FAIL host.iommu_faults" in r.output


def test_doctor_dmesg_json_names_both_failures_of_the_bazzite_log():
    name = FIX / "nvidia/nvrm-api-mismatch-then-rminitadapter-gsp-firmware-570.txt"
    r = CliRunner().invoke(app, ["doctor", "dmesg", "--json", str(name)])
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert doc["schema"] == "gpuhost.doctor-dmesg/1"
    assert [f["check"] for f in doc["findings"]] == ["host.nvidia_api_mismatch", "host.gpu_init"]


def test_doctor_dmesg_clean_log_exits_0_and_missing_file_2(tmp_path: Path):
    ok = CliRunner().invoke(app, ["doctor", "dmesg", str(FIX / "dmesg/intel-dmar-ir-x2apic-excerpt.txt")])
    assert ok.exit_code == 0 and "no IOMMU fault" in ok.output
    bad = CliRunner().invoke(app, ["doctor", "dmesg", str(tmp_path / "absent")])
    assert bad.exit_code == 2
