"""Reading the probe's JSON, and what the user gets when the probe cannot run."""

from __future__ import annotations

import json

import pytest

from gpuhost.errors import ProbeError
from gpuhost.p2p.json_out import outcome_json
from gpuhost.p2p.report import parse_report, report_from_text
from gpuhost.p2p.service import Settings, outcome_from_report
from tests.unit.p2p.captures import fixture


def _h200() -> dict:  # type: ignore[type-arg]
    return json.loads(fixture("probe_2x-h200-vm_nvlink.json").read_text())


def test_recorded_h200_report_reads_with_every_pair() -> None:
    r = parse_report(_h200())
    assert r.measured and len(r.gpus) == 2 and len(r.pairs) == 2
    assert r.gpus[0].nvlink.active_links == 18
    assert r.pairs[0].p2p is not None and r.pairs[0].p2p.integrity.failed == 0


def test_other_schema_versions_are_refused_by_number() -> None:
    data = _h200()
    data["schema_version"] = 99
    with pytest.raises(ProbeError, match="schema_version 99"):
        parse_report(data)


def test_malformed_report_names_the_field() -> None:
    data = _h200()
    data["gpus"][0]["index"] = "zero"
    with pytest.raises(ProbeError, match="gpus.0.index"):
        parse_report(data)


def test_output_without_json_is_an_error_quoting_it() -> None:
    with pytest.raises(ProbeError, match="Traceback"):
        report_from_text("Traceback (most recent call last): boom")


def test_unknown_keys_survive_a_round_trip() -> None:
    data = _h200()
    data["new_key"] = {"x": 1}
    assert parse_report(data).model_dump(mode="json")["new_key"] == {"x": 1}


def test_cannot_run_exits_2_with_what_is_missing_and_what_nvml_saw() -> None:
    data = {
        "schema_version": 1,
        "tool": "gpuhost-probe",
        "status": "cannot_run",
        "errors": [
            {
                "stage": "cuda",
                "message": "cuInit failed: CUDA_ERROR_UNKNOWN (999): unknown error",
                "hint": "in an LXC this usually means /dev/nvidia-uvm is missing",
            }
        ],
        "gpus": [
            {
                "index": 0,
                "measured": False,
                "name": "NVIDIA H200",
                "bus_id": "00000000:00:06.0",
                "pcie": {"gen_max": 5, "width_max": 16},
            }
        ],
        "pairs": [],
        "nvidia_smi": {"available": True, "query": {"exit_code": 0, "output": "0, NVIDIA H200"}},
        "host": {"device_nodes": ["nvidia0", "nvidiactl"]},
    }
    out = outcome_from_report("node1 CT 101", parse_report(data), Settings())
    assert out.exit_code == 2 and out.word == "CANNOT RUN"
    assert "CUDA_ERROR_UNKNOWN" in (out.cannot_run or "") and "nvidia-uvm" in (out.cannot_run or "")
    assert any("NVIDIA H200 at 00000000:00:06.0, PCIe Gen5 x16" in f for f in out.facts)
    assert outcome_json(out)["verdict"] == "CANNOT RUN"


def test_deadline_report_is_judged_but_fails() -> None:
    data = _h200()
    data["status"] = "deadline"
    out = outcome_from_report("x", parse_report(data), Settings())
    assert out.exit_code == 1
    assert any(f.check == "probe" for f in out.verdict.machine_findings)  # type: ignore[union-attr]
