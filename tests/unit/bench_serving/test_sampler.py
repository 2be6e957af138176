"""The standalone sampler: a fake ``nvidia-smi`` on PATH (CSV as ``--format=csv,noheader,nounits`` prints it),
SIGTERM and --duration stops, and the NVML path with a stand-in module at the pynvml boundary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuhost.bench_serving import sampler
from gpuhost.bench_serving.samples import read_samples

SAMPLER = Path(sampler.__file__)

FAKE_SMI = """#!/bin/sh
case "$*" in
  *index,name,uuid,power.limit*)
    echo "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-3d1c0b9e-0000-0000-0000-000000000000, 600.00"
    echo "1, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-3d1c0b9e-0000-0000-0000-000000000001, 600.00"
    exit 0;;
esac
while true; do
  echo "0, 87.92, 600.00, 0, 0, 2430, 13365, 91234, 97887, 41"
  echo "1, [N/A], 600.00, 3, 1, 2430, 13365, 91234, 97887, 40"
  sleep 0.1
done
"""


@pytest.fixture()
def fake_path(tmp_path: Path) -> dict[str, str]:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{tmp_path}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_parse_smi_line_numbers_and_not_available() -> None:
    g = sampler.parse_smi_line("0, 87.92, 600.00, 0, 0, 2430, 13365, 91234, 97887, 41")
    assert g == {
        "index": 0,
        "power_w": 87.92,
        "power_limit_w": 600.0,
        "util_gpu_pct": 0,
        "util_mem_pct": 0,
        "sm_clock_mhz": 2430,
        "mem_clock_mhz": 13365,
        "mem_used_mib": 91234,
        "mem_total_mib": 97887,
        "temp_c": 41,
    }
    assert sampler.parse_smi_line("1, [N/A], [Not Supported], 3, 1, 2430, 13365, 1, 2, 40")["power_w"] is None
    assert sampler.parse_smi_line("garbage") is None


def test_smi_command_asks_for_csv_every_interval() -> None:
    cmd = sampler.smi_command(500)
    assert cmd[-2:] == ["-lms", "500"] and "--format=csv,noheader,nounits" in cmd
    assert cmd[1].startswith("--query-gpu=index,power.draw,power.limit,utilization.gpu")


def test_stops_on_sigterm_and_every_line_is_json(fake_path: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "s.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(SAMPLER), "--backend", "nvidia-smi", "--interval-ms", "100", "-o", str(out)], env=fake_path
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (not out.exists() or out.read_text().count('"sample"') < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["type"] == "start" and lines[0]["backend"] == "nvidia-smi" and len(lines[0]["gpus"]) == 2
    assert lines[-1] == {**lines[-1], "type": "end", "reason": "signal"}
    samples = [ln for ln in lines if ln["type"] == "sample"]
    assert len(samples) >= 3 and all(len(s["gpus"]) == 2 for s in samples)
    assert all(s["t_mono"] > 0 and s["t_wall"] > 1e9 for s in samples)
    assert samples[0]["gpus"][1]["power_w"] is None and samples[0]["gpus"][0]["power_w"] == 87.92
    series = read_samples(out.read_text())
    assert series.end_reason == "signal" and len(series.ticks) == len(samples)


def test_duration_stops_by_itself(fake_path: dict[str, str]) -> None:
    r = subprocess.run(
        [sys.executable, str(SAMPLER), "--backend", "nvidia-smi", "--interval-ms", "100", "--duration", "0.6"],
        env=fake_path,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert r.returncode == 0
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines[-1]["reason"] == "duration" and lines[-1]["samples"] >= 1


def test_no_nvml_and_no_smi_is_an_error_line(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))
    r = subprocess.run(
        [sys.executable, str(SAMPLER), "--backend", "nvidia-smi", "--duration", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert r.returncode == 2 and json.loads(r.stdout.splitlines()[-1])["reason"] == "error"


class _FakeNvml:
    """Stands in for the pynvml module (the NVML boundary only)."""

    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return "GPU-7c890b39"

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return 700000

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 670670

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(gpu=97, memory=21)

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return 1440 if kind == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(used=1753 * 1024 * 1024, total=143771 * 1024 * 1024)

    def nvmlDeviceGetTemperature(self, h: int, kind: int) -> int:
        return 55

    def nvmlDeviceGetPcieThroughput(self, h: int, kind: int) -> int:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")


def test_nvml_path_with_the_module_stood_in(tmp_path: Path) -> None:
    out = tmp_path / "n.jsonl"
    with out.open("w") as fh:
        n, reason = sampler.run_nvml(_FakeNvml(), fh, 0.05, time.monotonic() + 0.3, sampler._Stop())
    assert reason == "duration" and n >= 2
    series = read_samples(out.read_text())
    assert series.backend == "nvml" and series.gpus[0]["name"] == "NVIDIA H200"
    g = series.ticks[0].gpus[0]
    assert g["power_w"] == 670.67 and g["power_limit_w"] == 700.0 and g["sm_clock_mhz"] == 1440
    assert g["mem_used_mib"] == 1753 and g["pcie_tx_kib_s"] is None  # a figure NVML refuses is null
