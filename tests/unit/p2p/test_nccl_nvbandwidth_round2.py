"""nccl-tests and nvbandwidth readers, round two (issue 30), on real captures (tests/fixtures/p2p/SOURCE.md):
the pre-2019 row formats, runs of only small sizes, ranks on several nodes, builds without MPI, in-place
columns, host-only and SM-copy nvbandwidth runs, and NVLink links that were not read."""

from __future__ import annotations

from gpuhost.p2p.parsers import nccl_tests, nvbandwidth
from tests.unit.p2p.captures import fixture
from tests.unit.p2p.test_capture_corpus import pair, verify


def _parse(name: str):
    return nccl_tests.parse(fixture(name).read_text())


def test_pre2019_rows_without_redop_are_read_with_their_summary():
    text = fixture("nccl-tests_pre2019_no-redop-0e+00_2gpu_excerpt.txt").read_text()
    assert nccl_tests.looks_like(text)
    ev = nccl_tests.parse(text)
    assert ev.nccl is not None
    assert ev.nccl["sizes"] == 12 and ev.nccl["largest_bytes"] == 134217728
    assert ev.nccl["busbw_gbps"] == 6.6972  # the tool's own average
    assert ev.nccl["max_busbw_gbps"] == 21.40 and ev.nccl["inplace_max_busbw_gbps"] == 21.86  # in-place read
    assert ev.nccl["correct"] is True and ev.nccl["reduces"] is False


def test_pre2019_pass_does_not_call_a_collective_without_reduction_an_all_reduce():
    code, out = verify("nccl-tests_pre2019_no-redop-0e+00_2gpu_excerpt.txt")
    assert code == 0 and out["verdict"] == "PASS"
    (f,) = out["machine"]
    assert f["message"] == "nccl-tests (a collective without reduction): bus bandwidth 6.6972 GB/s, correct results"


def test_nccl1_char_int_rows_on_one_gpu_have_nothing_to_judge():
    ev = _parse("nccl-tests_pre2019_op-res-char-int_indented_excerpt.txt")
    assert ev.nccl is not None and ev.nccl["sizes"] == 10 and ev.nccl["correct"] is True
    code, out = verify("nccl-tests_pre2019_op-res-char-int_indented_excerpt.txt")
    assert (code, out["verdict"]) == (0, "WARN")
    assert out["machine"][0]["message"].startswith("nothing to judge: NCCL all-reduce moved nothing between GPUs")


def test_small_sizes_only_is_not_a_pass():
    code, out = verify("nccl-tests_all-reduce_small-sizes-only_h20_excerpt.txt")
    assert (code, out["verdict"]) == (0, "WARN")
    (f,) = out["machine"]
    assert f["message"].startswith("nothing to judge: the largest size is 2048 B")
    assert out["nccl"]["small_only"] is True and out["nccl"]["max_busbw_gbps"] == 0.22


def test_two_nodes_device_0_are_two_gpus_named_by_host():
    code, out = verify("nccl-tests_all-reduce_2node-16x-h100_header_excerpt.txt")
    assert code == 2  # header only: no size was measured
    labels = [g["label"] for g in out["gpus"]]
    assert len(labels) == 12
    assert labels[:4] == ["worker-0 GPU0", "worker-0 GPU1", "worker-0 GPU2", "worker-0 GPU3"]
    assert "worker-1 GPU0" in labels and "GPU11" not in labels
    assert {g["host"] for g in out["gpus"]} == {"worker-0", "worker-1"}
    assert any("12 ranks on 2 hosts (worker-0, worker-1)" in n for n in out["notes"])


def test_every_process_rank_0_means_no_mpi():
    code, out = verify("nccl-tests_no-mpi-every-process-rank-0_2node_excerpt.txt")
    assert code == 2
    assert [g["label"] for g in out["gpus"]] == ["dgx01 GPU0", "dgx02 GPU0"]
    assert any("built without MPI (make MPI=1)" in n for n in out["notes"])


def test_the_older_two_node_capture_names_both_hosts():
    _, out = verify("nccl-tests_all-reduce_2x-v100-2node_header-only.txt")
    assert [g["label"] for g in out["gpus"]] == ["ip-172-31-20-228 GPU0", "ip-172-31-22-230 GPU0"]


def test_nvbandwidth_host_only_run_keeps_its_figures():
    code, out = verify("nvbandwidth_8x-rtx4090_v0.2_host-tests-excerpt.txt")
    assert (code, out["verdict"], out["cannot_run"]) == (0, "WARN", None)
    assert out["gpus"][0]["host_copies"]["h2d_gbps"] == 25.50
    (f,) = out["machine"]
    assert f["check"] == "host-copies" and "GPU0 H2D 25.50" in f["message"]


def test_nvbandwidth_sm_copy_run_keeps_its_figures():
    code, out = verify("nvbandwidth_8x-h100_sm-tests-quoted.txt")
    assert (code, out["verdict"]) == (0, "WARN")
    assert (out["gpus"][0]["host_copies"]["h2d_gbps"], out["gpus"][0]["host_copies"]["d2h_gbps"]) == (35.19, 52.77)


def test_nvbandwidth_sm_copy_peer_run_gives_every_pair_its_figure():
    # liguodongiot/llm-action's nvbandwidth page (8x H800, v0.2): the SM tests alone, from host_to_device_memcpy_sm
    # to device_to_device_memcpy_write_sm. Read by hand: all 56 ordered pairs copy at 165-168 GB/s (no N/A), far
    # above the ~52 GB/s the same GPUs reach to the host: peer access works everywhere, at NVLink rates.
    code, out = verify("nvbandwidth_8x-h800_v0.2_sm-tests-read-sm-ce-typo_excerpt.txt")
    assert (code, out["verdict"]) == (0, "PASS")
    assert len(out["pairs"]) == 56 and {p["p2p"] for p in out["pairs"]} == {"available"}
    assert out["p2p_copy"] == "SM writes, nvbandwidth device_to_device_memcpy_write_sm"
    # write_sm's title is "GPU(row) <- GPU(column)": row 1, column 0 (165.82) is data from GPU0 to GPU1
    assert pair(out, 0, 1)["figures"]["p2p"]["uni_gbps"] == 165.82
    assert pair(out, 1, 0)["figures"]["p2p"]["uni_gbps"] == 165.44
    figures = [p["figures"]["p2p"]["uni_gbps"] for p in out["pairs"]]
    assert (min(figures), max(figures)) == (165.13, 165.95)
    assert (out["gpus"][1]["host_copies"]["h2d_gbps"], out["gpus"][1]["host_copies"]["d2h_gbps"]) == (51.49, 52.81)
    assert not [f for f in out["machine"] if f["check"] == "host-copies"]  # not "only host copies were measured"


def test_nvbandwidth_v02_read_sm_titled_ce_is_an_sm_test_not_dropped():
    # nvbandwidth v0.2 printed "memcpy CE GPU(row) -> GPU(column)" above device_to_device_memcpy_read_sm
    # (NVIDIA/nvbandwidth#14); the test's name, not the title, says which engine copied
    reading = nvbandwidth.read_matrices(
        fixture("nvbandwidth_8x-h800_v0.2_sm-tests-read-sm-ce-typo_excerpt.txt").read_text()
    )
    read_sm = reading.matrices["device_to_device_memcpy_read_sm"]
    assert read_sm.engine == "SM" and read_sm.title.startswith("memcpy CE ")
    assert read_sm.rows[0][1] == 167.56 and len(read_sm.rows) == 8


def test_nvlink_links_are_null_where_nvlink_was_not_read():
    _, topo = verify("topo-p2p_2x-h200-vm_nvlink.txt")
    assert [g["nvlink"]["links"] for g in topo["gpus"]] == [None, None]
    _, probe = verify("probe_2x-h200-vm_nvlink.json")
    assert all(isinstance(g["nvlink"]["links"], int) and g["nvlink"]["links"] > 0 for g in probe["gpus"])


def test_titan_cards_get_the_consumer_card_advice_not_iommu_or_cliques():
    code, out = verify("cuda-samples_8x-titan-rtx_no-p2p_excerpt.txt")
    assert code == 1
    advice = " ".join(out["diagnosis"])
    assert "TITAN RTX: consumer cards (GeForce, TITAN) do not do PCIe P2P with NVIDIA's stock driver" in advice
    assert "iommu=pt" not in advice and "clique" not in advice


def test_titan_cards_whose_capture_shows_p2p_get_no_consumer_card_advice():
    # 4x TITAN V (madobet/webooru#104): every pair "CAN Access Peer", connectivity all 1: P2P is there, so the
    # "consumer cards do not do PCIe P2P" advice would contradict the capture
    code, out = verify("cuda-samples_4x-titan-v_p2p-available_indented_excerpt.txt")
    assert (code, out["verdict"]) == (0, "PASS")
    assert [g["name"] for g in out["gpus"]] == ["TITAN V"] * 4
    assert {p["p2p"] for p in out["pairs"]} == {"available"} and len(out["pairs"]) == 12
    assert "consumer cards" not in " ".join(out["diagnosis"])


def test_integrity_fail_has_no_per_gpu_pass_and_no_false_no_d2d_note():
    code, out = verify("nvbandwidth_8x-a100-sxm4_v0.7_validation-failure.txt")
    assert (code, out["verdict"]) == (1, "FAIL")
    assert [g["verdict"] for g in out["gpus"]] == [None] * len(out["gpus"])
    assert "no device-to-device copy-engine test in this output" not in out["notes"]
    assert any("device-to-device test stopped on wrong data" in n for n in out["notes"])
