"""The scheduler's batch lines read from real SGLang logs (tests/fixtures/sglang/logs*, see their SOURCE.md), and
the admission check judging them: requests waiting with every running slot taken."""

from pathlib import Path

from gpuhost.checks.finding import Level
from gpuhost.checks.serve import check_admission_queueing, running_bound, tune_levels
from gpuhost.facts.batchlog import batch_lines

SGLANG = Path(__file__).resolve().parents[2] / "fixtures" / "sglang"


def lines(name: str) -> list[str]:
    return (SGLANG / name).read_text().splitlines()


def test_a_current_prefill_line_is_read_and_a_paste_cut_mid_field_is_not():
    got = batch_lines(lines("logs/sglang-19712-dsv32-running.log"))
    # line 5 is whole; line 11 ends in '#que' (the paste's own cut)
    assert [(b.number, b.kind, b.running, b.queued) for b in got] == [(5, "Prefill", 7, 1)]


def test_the_older_period_forms_of_prefill_and_decode():
    (prefill,) = batch_lines(lines("logs-round2/sglang-1953-nan-logits-after-startup-amd.log"))
    assert (prefill.number, prefill.kind, prefill.running, prefill.queued) == (10, "Prefill", 0, 0)
    (decode,) = batch_lines(lines("logs/sglang-938-decode-queue.log"))
    assert (decode.kind, decode.running, decode.queued) == ("Decode", 1010, 12279)
    assert decode.text.startswith("Decode batch. #running-req: 1010")


def test_requests_waiting_at_the_bound_warn_with_the_load_met():
    batches = batch_lines(lines("logs/sglang-938-decode-queue.log"))
    (f,) = check_admission_queueing(1010, batches, "pve1/CT 200")
    assert f.level == Level.WARN and f.check == "serve.admission-queueing"
    assert f.message == (
        "1 of 1 batch lines since the start show requests waiting with all 1010 running slots taken "
        "(at most 12279 waiting beside 1010 running)"
    )
    assert f.cause is not None and f.cause.startswith("--max-running-requests 1010:")
    assert tune_levels(batches, 1010) == "1010,13289"


def test_waiting_below_the_bound_is_not_the_bound_and_no_bound_or_line_is_not_judged():
    batches = batch_lines(lines("logs/sglang-19712-dsv32-running.log"))  # 7 running, 1 waiting
    (f,) = check_admission_queueing(8, batches, "pve1/CT 200")
    assert (f.level, f.message) == (
        Level.PASS,
        "no request waited at the bound of 8 (1 batch lines, at most 7 running)",
    )
    assert check_admission_queueing(None, batches, "pve1/CT 200") == []
    assert check_admission_queueing(8, [], "pve1/CT 200") == []


def test_the_bound_is_the_schedulers_effective_one_over_its_dp_ranks_else_the_argument():
    per_dp = {"effective_max_running_requests_per_dp": 16}
    assert running_bound({"max_running_requests": 128, "internal_states": [per_dp] * 8}) == 128
    assert running_bound({"max_running_requests": 64, "internal_states": [{"last_gen_throughput": 0.0}]}) == 64
    assert running_bound({"max_running_requests": None}) is None
