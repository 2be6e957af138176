"""``gpuhost tune sglang``'s run on fake launch and bench steps: an interruption puts the previous profile back
and keeps the state, ``--resume`` then measures nothing twice and finishes with the winner written and launched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuhost.bench_serving.sweep import SweepPlan
from gpuhost.cli import tune_run
from gpuhost.serve.profile import get_profile, load_profiles


class Target:
    def __init__(self) -> None:
        self.serving = "seeds-start"
        self.launches: list[str] = []
        self.benched: list[str] = []
        self.interrupt_at: int | None = None

    def launch(self, ctx: Any, profile: str, dirs: list[str]) -> tuple[str, str]:
        self.launches.append(profile)
        self.serving = profile
        return "ok", ""

    def bench(self, ctx: Any, plan: Any, bench_dir: Path, progress: Any) -> tuple[float, float | None, str]:
        if self.interrupt_at is not None and len(self.benched) == self.interrupt_at:
            raise KeyboardInterrupt
        self.benched.append(self.serving)
        variants = bench_dir.parents[1] / "variants.yml"
        flags = load_profiles([variants], shipped=False).get(self.serving) if variants.exists() else None
        admission = int((flags.flags if flags else {}).get("--max-running-requests", 64))
        return 100.0 * admission / 64, 200.0, str(bench_dir)


@pytest.fixture
def ctx(tmp_path: Path) -> tune_run.TuneTarget:
    p = get_profile("glm5-nvfp4-tp8-sm120")
    base = p.model_copy(update={"name": "seeds-start", "flags": {**p.flags, "--max-running-requests": 64}})
    return tune_run.TuneTarget(tmp_path / "inv.yml", None, "pve1", 110, "pve1/CT 110", [], base)


def test_interrupted_then_resumed(ctx: tune_run.TuneTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = Target()
    target.interrupt_at = 2
    monkeypatch.setattr(tune_run, "_launch", target.launch)
    monkeypatch.setattr(tune_run, "_bench", target.bench)
    plan = SweepPlan(concurrencies=(256, 1024), input_len=8, output_len=8)
    said: list[str] = []

    def echo(message: Any, **kw: Any) -> None:
        said.append(str(message))

    out, profiles = tmp_path / "runs", tmp_path / "profiles"
    common = {"budget": 3, "name": "seeds-tuned", "profile_dir": profiles, "out": out, "echo": echo}
    assert tune_run.run(ctx, plan, resume=False, **common) == 1
    assert target.serving == "seeds-start"  # interrupted while benching the third: the previous profile is back
    assert "tune stopped: interrupted" in said and "seeds-start serves again" in said
    first = list(target.launches)
    target.interrupt_at = None
    assert tune_run.run(ctx, plan, resume=True, **common) == 0
    again = target.launches[len(first) :]
    # the two measured before are not launched again: the third, then the winner
    assert again[:-1] == [first[2]] and again[-1] == "seeds-tuned"
    assert target.serving == "seeds-tuned"
    assert load_profiles([profiles])["seeds-tuned"].flags["--max-running-requests"] == 1024
    (run,) = list(out.iterdir())
    assert (run / "tune.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(Exception, match="no unfinished tune run"):
        tune_run.run(ctx, plan, resume=True, **common)
