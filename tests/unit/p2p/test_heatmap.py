"""The P2P heatmap stands alone: one colour scale per unit, the unit on each colour bar, legible at 9 GPUs, the
pairs that failed framed, the run named."""

from __future__ import annotations

import calendar

import pytest

from gpuhost.p2p.heatmap import heatmap_figure, outcome_marks
from gpuhost.p2p.service import judge_files, settings_from_options
from tests.unit.p2p.captures import fixture

plt = pytest.importorskip("matplotlib.pyplot")
NOON = calendar.timegm((2026, 12, 1, 12, 0, 0))


def _judged(name: str):  # type: ignore[no-untyped-def]
    return judge_files([fixture(name)], settings_from_options(expect_p2p=True, link=None, baseline=None))


def _panels(fig):  # type: ignore[no-untyped-def]
    return {ax.get_title(): ax for ax in fig.axes if ax.get_visible() and ax.images}


def test_panels_of_one_unit_share_a_scale_and_name_their_unit():
    # the trap: each panel had its own range, so 0.4 µs (peer) and 14 µs (staged) were both the darkest colour
    outcome = _judged("cuda-samples_9gpu-rtxpro6000-5090_pcie-p2p.txt")
    fig = heatmap_figure(outcome.evidence, "t")
    panels = _panels(fig)
    peer, staged = panels["peer 16-byte latency (µs)"], panels["staged 16-byte latency (µs)"]
    assert peer.images[0].get_clim() == staged.images[0].get_clim()
    # the capture's staged latencies reach 14.3 µs, its peer ones stay under 0.5 µs
    assert peer.images[0].get_clim()[1] >= 14.0
    gbps = {panels[t].images[0].get_clim() for t in panels if t.endswith("(GB/s)")}
    assert len(gbps) == 1 and gbps.pop()[1] >= 110.0  # both ways: 111 GB/s in the capture
    bars = sorted({ax.get_ylabel() for ax in fig.axes if not ax.images and ax.get_ylabel()})
    assert bars == ["GB/s", "µs"]
    plt.close(fig)


def test_nine_gpus_cell_figures_do_not_overlap():
    outcome = _judged("cuda-samples_9gpu-rtxpro6000-5090_pcie-p2p.txt")
    fig = heatmap_figure(outcome.evidence, "t")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for title, ax in _panels(fig).items():
        boxes = [t.get_window_extent(renderer) for t in ax.texts]
        assert len(boxes) == 9 * 8, title
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert not a.overlaps(b), f"{title}: figures overlap"
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels == [str(i) for i in range(9)]
    plt.close(fig)


def test_a_fail_picture_frames_the_failing_pairs_and_names_the_run():
    outcome = _judged("cuda-samples_4x-a100-pcie_nvlink-pairs.txt")
    assert outcome.word == "FAIL"
    marks = outcome_marks(outcome)
    # the capture: NVLink pairs 0-1 and 2-3 reach each other, the PCIe pairs have no peer access
    assert set(marks) == {(s, d) for s in range(4) for d in range(4) if s != d and {s, d} not in ({0, 1}, {2, 3})}
    assert set(marks.values()) == {"FAIL"}
    fig = heatmap_figure(outcome.evidence, f"{outcome.target}: FAIL", marks=marks, subtitle="pve1 · judged noon")
    for title, ax in _panels(fig).items():
        framed = {
            (round(p.get_y() + 0.5), round(p.get_x() + 0.5)) for p in ax.patches if p.get_edgecolor()[:3] == (1, 0, 0)
        }
        assert framed == set(marks), title
    texts = [t.get_text() for t in fig.texts]
    assert any("pve1 · judged noon" in t and "red frame: a FAIL pair" in t for t in texts), texts
    assert fig._suptitle.get_text().endswith(": FAIL") and fig._suptitle.get_color() == "red"
    plt.close(fig)


def test_the_cli_heatmap_names_target_source_and_time(tmp_path, monkeypatch):
    import gpuhost.p2p.heatmap as heatmap

    outcome = _judged("cuda-samples_4x-a100-pcie_nvlink-pairs.txt")
    seen = {}
    monkeypatch.setattr(heatmap, "write_heatmap", lambda ev, path, title, **kw: seen.update(title=title, **kw))
    heatmap.write_outcome_heatmap(outcome, tmp_path / "m.png", now=NOON)
    assert seen["title"].endswith("cuda-samples_4x-a100-pcie_nvlink-pairs.txt: FAIL")
    assert seen["subtitle"].endswith("· p2pBandwidthLatencyTest · judged 2026-12-01 12:00 UTC")
