"""The tune search on a fake server: the variants it lists, the coordinate descent, a wrong variant never kept,
the previous profile launched again after a failure, and ``--resume`` measuring nothing twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.bench_serving import tune
from gpuhost.bench_serving.tune_variants import Variant, apply
from gpuhost.serve.profile import Profile, get_profile, load_profiles

SHIPPED = "glm5-nvfp4-tp8-sm120"


def seeds_start() -> Profile:
    """The shipped profile as the seeds started: admission 64, FlashInfer autotune off."""
    p = get_profile(SHIPPED)
    flags = {**p.flags, "--max-running-requests": 64, "--disable-flashinfer-autotune": True}
    return p.model_copy(update={"name": "seeds-start", "flags": flags})


def test_check_plan_of_the_shipped_profile_lists_each_axis_and_refuses_trtllm_moe_on_sm120() -> None:
    rows = [(v.axis, v.label, why) for v, _p, why in tune.planned(get_profile(SHIPPED), (256, 1024), budget=32)]
    assert rows[0] == ("base", "(the running profile)", [])
    labels = [label for _a, label, _w in rows]
    # the shipped profile already admits 1024 (the top level): no admission variant
    assert not any("--max-running-requests" in label for label in labels)
    assert "--cuda-graph-backend-decode disabled, no --cuda-graph-max-bs-decode" in labels
    assert "--cuda-graph-max-bs-decode 1024" in labels and "--disable-radix-cache" in labels
    (trtllm,) = [r for r in rows if r[1] == "--moe-runner-backend flashinfer_trtllm"]
    assert trtllm[2] == ["--moe-runner-backend flashinfer_trtllm on SM120"]
    assert ("attention", "--dsa-prefill-backend triton_sparse_mla", []) in rows


def test_check_plan_is_cut_at_the_budget_but_keeps_refused_ones() -> None:
    rows = tune.planned(seeds_start(), (256, 1024), budget=3)
    launchable = [v.label for v, _p, why in rows if not why]
    assert launchable == [
        "(the running profile)",
        "--max-running-requests 1024",
        "--cuda-graph-backend-decode disabled, no --cuda-graph-max-bs-decode",
    ]
    assert [v.label for v, _p, why in rows if why] == ["--moe-runner-backend flashinfer_trtllm"]


class FakeServer:
    """Tok/s from a table of what matters; the profile in service after each launch."""

    def __init__(self, wrong_flag: str | None = None, crash_flag: str | None = None) -> None:
        self.wrong_flag, self.crash_flag = wrong_flag, crash_flag
        self.serving: str | None = None
        self.launches: list[str] = []
        self.benched: list[str] = []
        self.restores = 0
        self.current: Profile | None = None

    def launch(self, p: Profile) -> tuple[str, str]:
        self.launches.append(p.name)
        if self.crash_flag and self.crash_flag in p.flags:
            self.serving = None
            return "crashed", "CT 230: sglang exited (illegal memory access)"
        self.serving, self.current = p.name, p
        if self.wrong_flag and self.wrong_flag in p.flags:
            return "wrong", "canary 0/4 correct"
        return "ok", ""

    def bench(self, p: Profile) -> tuple[float, float | None, str]:
        self.benched.append(p.name)
        f = p.flags
        tok = 100.0 * min(int(f.get("--max-running-requests", 64)), 1024) / 64
        if f.get("--disable-flashinfer-autotune"):
            tok /= 1.25
        return tok, 100.0 + tok / 10, f"bench/{p.name}"

    def restore(self) -> tuple[str, str]:
        self.restores += 1
        self.serving = "seeds-start"
        return "ok", ""


def steps(server: FakeServer) -> tune.Steps:
    return tune.Steps(launch=server.launch, bench=server.bench, restore=server.restore)


def state(tmp_path: Path) -> tune.TuneState:
    s = tune.TuneState(tmp_path / "state.json", {"base": "seeds-start"})
    s.save()
    return s


def test_descent_keeps_admission_then_autotune_and_never_a_wrong_variant(tmp_path: Path) -> None:
    server = FakeServer(wrong_flag="--disable-radix-cache")
    out = tune.search(seeds_start(), (256, 1024), 8, state(tmp_path), steps(server))
    assert out.best.status == "ok"
    assert dict(tuple(c) for c in out.best.changes) == {
        "--max-running-requests": 1024,
        "--disable-flashinfer-autotune": None,
    }
    # 100 * 1024/64 = 1600 tok/s, autotune on
    assert out.best.tok_s == 1600.0
    wrong = [m for m in out.tried if m.status == "wrong"]
    assert [m.label for m in wrong] == ["--disable-radix-cache, --max-running-requests 1024"]
    assert server.restores == 1  # the previous profile came back right after the wrong variant
    assert wrong[0].name not in server.benched  # a wrong variant is never benched
    assert len(server.launches) == 8  # the budget


def test_a_refused_variant_is_never_launched_and_costs_no_budget(tmp_path: Path) -> None:
    server = FakeServer()
    out = tune.search(seeds_start(), (256, 1024), 32, state(tmp_path), steps(server))
    refused = [m for m in out.tried if m.status == "refused"]
    # on top of the best so far (admission 1024, autotune back on)
    assert [m.label for m in refused] == [
        "no --disable-flashinfer-autotune, --max-running-requests 1024, --moe-runner-backend flashinfer_trtllm"
    ]
    assert refused[0].name not in server.launches
    assert len(server.launches) == len([m for m in out.tried if m.status != "refused"])


def test_resume_measures_nothing_twice(tmp_path: Path) -> None:
    first = FakeServer()
    s = state(tmp_path)
    tune.search(seeds_start(), (256, 1024), 3, s, steps(first))
    again = FakeServer()
    resumed = tune.TuneState.load(tmp_path / "state.json")
    out = tune.search(seeds_start(), (256, 1024), 6, resumed, steps(again))
    # base, admission, graphs off before; the capture bound, the radix cache and autotune now
    assert len(first.launches) == 3 and len(again.launches) == 3
    assert not set(again.launches) & set(first.launches)
    assert out.best.tok_s == 1600.0


def test_a_failing_running_profile_stops_the_search(tmp_path: Path) -> None:
    server = FakeServer(crash_flag="--disable-flashinfer-autotune")
    with pytest.raises(tune.BaseFailed, match="seeds-start itself failed"):
        tune.search(seeds_start(), (256, 1024), 4, state(tmp_path), steps(server))


def test_the_winner_file_loads_back_as_a_user_profile(tmp_path: Path) -> None:
    base = seeds_start()
    v = Variant("admission", (("--max-running-requests", 1024), ("--disable-flashinfer-autotune", None)))
    best = apply(base, v, "x")
    m = tune.Measured("x", "admission", v.label, v.key, "ok", tok_s=1600.0, watts=250.0)
    outcome = tune.TuneOutcome(base, m, best, [m])
    tune.write_profile_file(tmp_path / "p" / "seeds-tuned.yml", [tune.winner_profile(outcome, "seeds-tuned", (256,))])
    loaded = load_profiles([tmp_path / "p"])["seeds-tuned"]
    assert loaded.flags["--max-running-requests"] == 1024
    assert "--disable-flashinfer-autotune" not in loaded.flags
    assert loaded.flags["--moe-runner-backend"] == "flashinfer_cutlass"
    assert "1600.0 output tok/s, 250 W per GPU" in loaded.notes[-1]


def test_table_marks_the_winner() -> None:
    a = tune.Measured("b", "base", "(the running profile)", "base", "ok", tok_s=400.0, watts=90.0)
    b = tune.Measured("w", "admission", "--max-running-requests 1024", "k", "ok", tok_s=1600.0, watts=300.0)
    c = tune.Measured("r", "radix cache", "--disable-radix-cache", "r", "wrong", detail="canary 0/4 correct")
    lines = tune.render_table([a, b, c], b).splitlines()
    assert lines[0].split() == ["variant", "axis", "change", "status", "out", "tok/s", "W/GPU"]
    assert lines[2].startswith("*  w") and lines[2].rstrip().endswith("1600.0    300")
    assert lines[3].split()[-3:] == ["wrong", "-", "-"]
