"""The doctor's report: the JSON document, the commands it prints, the exit codes, and the bench run it reads."""

import json
import subprocess
import sys
from pathlib import Path

from gpuhost.checks.finding import Finding, Level
from gpuhost.doctor.gather import Observed, bench_findings, last_bench
from gpuhost.doctor.report import build_report, render

INV = "inventory/site.yml"


def test_json_shape_and_exit_code_of_a_fatal_run():
    observed = [
        Observed(Finding(Level.PASS, "host.cmdline_booted", "pve1", "booted with iommu=pt")),
        Observed(
            Finding(Level.FAIL, "sglang.log.nan-in-sampling", "pve1/CT 200", "NaN/inf in the sampling probabilities"),
            ("    12 | RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",),
        ),
        Observed(Finding(Level.FAIL, "serve.health", "pve1/CT 200", "no answer (connection refused)", fix="restart")),
    ]
    report = build_report(observed, INV, trips=3)
    doc = report.to_json()
    assert report.exit_code == 1
    assert {k: doc[k] for k in ("schema", "fatal", "exit_code", "round_trips", "passed")} == {
        "schema": "gpuhost.doctor/1",
        "fatal": True,
        "exit_code": 1,
        "round_trips": 3,
        "passed": 1,
    }
    first, second = doc["findings"]
    assert first == {
        "rank": 1,
        "level": "FAIL",
        "check": "sglang.log.nan-in-sampling",
        "subject": "pve1/CT 200",
        "message": "NaN/inf in the sampling probabilities",
        "cause": None,
        "fix": first["fix"],  # the signature's registered fix (its words are the signature table's)
        "stage": "serving",
        "evidence": ["    12 | RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"],
        "command": "gpuhost launch sglang -i inventory/site.yml --limit pve1 --ctid 200 --allow-restart",
        "explained_by": None,
        "docs": "troubleshooting.md#sglang-log-nan-in-sampling",
    }
    assert first["fix"]
    assert second["explained_by"] == {"check": "sglang.log.nan-in-sampling", "subject": "pve1/CT 200"}
    assert second["evidence"] == ["no answer (connection refused)"]  # no log lines: the message is the evidence
    assert second["fix"] == "restart"  # the finding's own fix before its check's general one
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[3] / "docs/schema/doctor.schema.json").read_text())
    jsonschema.validate(doc, schema)
    jsonschema.validate(build_report([], INV).to_json(), schema)


def test_warnings_only_exit_0_and_the_text_report_says_the_counts():
    observed = [Observed(Finding(Level.WARN, "ct.memlock", "pve1/CT 200", "ulimit -l is 8192"))]
    report = build_report(observed, INV, trips=2)
    assert report.exit_code == 0
    lines = render(report)
    assert lines[0] == " 1. WARN ct.memlock  pve1/CT 200  [guest]"
    assert (
        "    run:      gpuhost provision lxc -i inventory/site.yml --limit pve1 --ctid 200 --allow-reboot --allow-restart"
        in lines
    )
    assert "    docs:     troubleshooting.md#ct-memlock" in lines
    assert lines[-1] == "0 FAIL, 1 WARN, 0 INFO, 0 passed (2 round trips)"
    assert render(build_report([], INV))[0] == "no finding: every check passed"


def test_host_boot_fixes_carry_allow_reboot_and_a_vm_its_vmid():
    observed = [
        Observed(Finding(Level.FAIL, "host.nvidia_uvm", "pve1", "/dev/nvidia-uvm is missing")),
        Observed(Finding(Level.FAIL, "vm.pcie", "pve1/VM 300", "hostpci0 lacks pcie=1")),
        Observed(Finding(Level.WARN, "bench.figures-sane", "pve1/CT 200", "TTFT 0 ms")),
    ]
    commands = {e.ranked.finding.check: e.command for e in build_report(observed, INV).entries}
    assert commands == {
        "host.nvidia_uvm": "gpuhost provision host -i inventory/site.yml --limit pve1 --allow-reboot",
        "vm.pcie": "gpuhost provision vm -i inventory/site.yml --limit pve1 --vmid 300 --allow-reboot --allow-restart",
        "bench.figures-sane": None,  # the client's settings: no gpuhost command fixes it
    }


def test_requests_waiting_at_the_bound_are_fixed_by_a_tune_of_the_bound_at_the_load_met():
    waiting = Finding(Level.WARN, "serve.admission-queueing", "pve1/CT 200", "requests waited at the bound of 64")
    (entry,) = build_report([Observed(waiting, ("    40 | Decode batch, ...",), "64,256")], INV).entries
    assert entry.command == (
        "gpuhost tune sglang -i inventory/site.yml --limit pve1 --ctid 200 --concurrency 64,256 --budget 2 "
        "--allow-restart"
    )
    (bare,) = build_report([Observed(waiting)], INV).entries
    assert bare.command is None  # no load seen: no levels to measure at


def _bench_doc(profile, created):
    return {
        "schema": "gpuhost.bench-sglang/1",
        "created": created,
        "plan": {"profile": profile},
        "findings": [
            {
                "level": "WARN",
                "check": "bench.admission-bound",
                "subject": "pve1/CT 200",
                "message": "c256: 256 concurrent requests against a server that runs at most 64: 192 of them queue",
                "cause": "--max-running-requests 64",
                "fix": "raise --max-running-requests above 256, or treat c64 as the top level",
            },
            {"level": "PASS", "check": "bench.gpu-samples", "subject": "x", "message": "ok"},
        ],
    }


def test_the_last_bench_of_the_current_start_is_read_and_an_older_one_is_stale(tmp_path):
    launched = {"profile": "glm5-b200-tp8", "started_at": "2026-12-01T10:00:00Z"}
    doc = _bench_doc("glm5-b200-tp8", "2026-12-01T10:05:00+00:00")
    found = bench_findings(doc, launched, "pve1/CT 200", "run")
    assert [(f.level, f.check, f.cause) for f in found] == [
        (Level.WARN, "bench.admission-bound", "--max-running-requests 64"),
        (Level.PASS, "bench.gpu-samples", None),
    ]
    assert all(f.subject == "pve1/CT 200" for f in found)
    older = bench_findings(_bench_doc("glm5-b200-tp8", "2026-12-01T09:59:59+00:00"), launched, "pve1/CT 200", "r1")
    assert [(f.check, f.message) for f in older] == [
        (
            "doctor.bench-stale",
            "the last bench run (r1) is from 2026-12-01T09:59:59, before the current start at 2026-12-01T10:00:00: "
            "its findings are left out",
        )
    ]
    other = bench_findings(_bench_doc("glm5-tp8-mrr64", "2026-12-01T10:05:00+00:00"), launched, "s", "r2")
    assert other[0].message == (
        "the last bench run (r2) measured profile glm5-tp8-mrr64, now glm5-b200-tp8 runs: its findings are left out"
    )
    for name in ("20261201T100000-pve1-ct200", "20261201T110000-pve1-ct200", "20261201T120000-pve1-ct201"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text("{}")
    assert last_bench(tmp_path, "pve1", 200) == tmp_path / "20261201T110000-pve1-ct200" / "result.json"
    assert last_bench(tmp_path / "absent", "pve1", 200) is None


def _gpuhost(*args):
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, timeout=60)


def test_cli_without_inventory_or_subcommand_prints_help_and_exits_2(tmp_path):
    r = _gpuhost("doctor")
    assert r.returncode == 2
    assert "sglang-log" in r.stdout and "-i, --inventory" in r.stdout
    bad = tmp_path / "inv.yml"
    bad.write_text("nodes:\n  pve1: {address: 127.0.0.1, bogus: 1}\n")
    r = _gpuhost("doctor", "-i", str(bad))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "inv.yml" in r.stderr and "bogus" in r.stderr
