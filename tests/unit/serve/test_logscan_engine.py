"""The scanner over a log as a user pastes or streams it: the finding names the subject and quotes the line, lines
arrive in chunks, a last line without a newline, repeated hits collect their lines up to the signature's limit,
an OOM says when it happened, the phases count graph captures and ready lines. Lines are SGLang 0.5.x spellings
(the same as test_logscan_signatures.py)."""

from __future__ import annotations

from gpuhost.checks import Level
from gpuhost.serve.logscan import LogScanner, PhaseTracker
from gpuhost.serve.logscan.engine import scan_text
from gpuhost.serve.logscan.normalize import message, split_raw

CRASH = "[2026-12-01 10:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


def test_the_finding_names_the_subject_and_quotes_the_message() -> None:
    (f,) = LogScanner("pve1/CT 200").feed(CRASH)
    assert (f.level, f.check, f.subject) == (Level.FAIL, "sglang.log.scheduler-crashed", "pve1/CT 200")
    assert f.message == "A scheduler (TP rank) died: Scheduler hit an exception: Traceback (most recent call last):"
    line = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." + "x" * 400
    (long,) = LogScanner().feed(line)
    assert long.message == "No room left for the KV cache: " + line[:300]  # the line cut at 300 characters


def test_scan_text_streams_chunks_and_reads_a_last_line_without_newline() -> None:
    s = scan_text("Load weight begin. avail mem=94.20 GB\n" + CRASH, "pve1/CT 201")
    assert [h.signature for h in s.hits] == ["scheduler-crashed"]
    assert s.hits[0].finding.subject == "pve1/CT 201" and s.hits[0].lines == [(2, CRASH)]
    chunked = LogScanner()
    assert chunked.feed_chunk("first line\n[2026-12-01 10:00:00 TP3] Scheduler hit an exc") == []
    assert [f.check for f in chunked.feed_chunk("eption: Traceback (most recent call last):\n")] == [
        "sglang.log.scheduler-crashed"
    ]
    assert chunked.close() == []  # nothing left over
    tail = LogScanner()
    tail.feed_chunk("ok\n" + OOM)
    assert tail.findings == [] and [f.check for f in tail.close()] == ["sglang.log.cuda-oom"]


def test_a_repeated_signature_collects_its_lines_up_to_the_limit() -> None:
    s = LogScanner()
    for _ in range(12):
        s.feed(CRASH)
    assert len(s.hits) == 1 and [n for n, _ in s.hits[0].lines] == list(range(1, 9))  # max_lines 8


def test_an_oom_says_when() -> None:
    loading = LogScanner()
    loading.feed("[2026-12-01 10:00:00 TP0] Load weight begin. avail mem=94.20 GB")
    assert loading.feed(OOM)[0].cause.startswith("during weight loading: ")  # type: ignore[union-attr]
    capture = LogScanner()
    capture.feed(
        "[2026-12-01 10:00:40 TP0] Load weight end. elapsed=36.1 s, type=GlmMoeDsaForCausalLM, avail mem=38.1 GB"
    )
    capture.feed("[2026-12-01 10:00:42 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1")
    assert capture.feed(OOM)[0].cause.startswith("during CUDA graph capture: ")  # type: ignore[union-attr]
    later = LogScanner()
    later.feed(
        "[2026-12-01 10:00:40 TP0] Load weight end. elapsed=36.1 s, type=GlmMoeDsaForCausalLM, avail mem=38.1 GB"
    )
    cause = later.feed(OOM)[0].cause
    assert cause is not None and not cause.startswith("during")


def test_a_traceback_explained_by_a_fatal_signature_is_not_reported() -> None:
    s = scan_text("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nKeyError: 'glm_moe_dsa'\n")
    assert {h.signature for h in s.hits} == {"python-traceback", "transformers-model-type"}
    assert [h.signature for h in s.report()] == ["transformers-model-type"]
    alone = scan_text("Traceback (most recent call last):\n")
    assert [h.signature for h in alone.report()] == ["python-traceback"] and not alone.fatal


def test_only_the_signatures_given_are_looked_for() -> None:
    from gpuhost.serve.logscan import SIGNATURES

    only_oom = [s for s in SIGNATURES if s.name == "cuda-oom"]
    s = LogScanner(signatures=only_oom)
    assert s.feed(CRASH) == [] and [f.check for f in s.feed(OOM)] == ["sglang.log.cuda-oom"]


def test_lines_and_prefixes() -> None:
    assert split_raw("a\rb\nc") == ["a", "b", "c"]
    assert message("[2026-12-01 10:00:00 TP0] INFO: Load weight end.\r\n") == "Load weight end."
    stacked = "Dec 01 10:00:00 gpu1 sglang[4242]: [2026-12-01 10:00:00 TP0] ERROR: KeyError: 'x'"
    assert message(stacked) == "KeyError: 'x'"
    assert message("  KV Cache is allocated.  ") == "KV Cache is allocated."


def test_phases_count_captures_and_ready_lines() -> None:
    t = PhaseTracker()
    for line in (
        "Capture cuda graph begin. This can take up to several minutes.",
        "Capture cuda graph begin. This can take up to several minutes.",
        "Capture cuda graph end. Time elapsed: 2.19 s",
        "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        "The server is fired up and ready to roll!",
        "The server is fired up and ready to roll!",
    ):
        t.feed(message(line))
    # two begins, one end: but once Uvicorn is up no capture counts as open, and the one without its end line has
    # ended too (versions that print no end line): two done
    assert (t.state.graph_captures_open, t.state.graph_captures_done) == (0, 2)
    assert t.state.ready_lines == 2 and t.state.url == "http://0.0.0.0:30000"


def test_prefixes_in_another_order_are_all_removed() -> None:
    # a level name written before SGLang's timestamp takes a second pass over the prefixes
    assert message("ERROR: [2026-12-01 10:00:00 TP0] KeyError: 'glm_moe_dsa'") == "KeyError: 'glm_moe_dsa'"
    assert message("WARNING: (SGLangEngine pid=1) [2026-12-01 10:00:00] x") == "x"
