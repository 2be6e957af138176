"""The admission and decode graph-capture bounds a launch reports, read from the shipped GLM-5-NVFP4 profiles.

Expected figures are the seed story's (seed 000: 1,024 running requests reached 3,740 tok/s where the 64 cap
plateaued at ~880) and sglang#29580's decode capture cap of 256 on 96 GB cards, not the profile's own text.
"""

from __future__ import annotations

from gpuhost.serve.bounds import bounds
from gpuhost.serve.profile import load_profiles


def test_shipped_profile_admits_far_above_the_sweep_and_captures_separately() -> None:
    b = bounds(load_profiles()["glm5-nvfp4-tp8-sm120"])
    assert b.admission == 1024 and b.capture == 256 and b.graphs
    assert b.describe() == "admits 1024 running requests, decode graphs up to batch 256"


def test_every_shipped_0523_profile_admits_more_than_the_seeds_plateau_cap() -> None:
    profiles = load_profiles()
    for name in ("glm5-nvfp4-tp8-sm120", "glm5-nvfp4-tp8-sm120-graph-breakable", "glm5-nvfp4-tp8-sm120-graph-disabled"):
        b = bounds(profiles[name])
        assert b.admission is not None and b.admission >= 1024, name  # the bench example sweeps to 1,024
    eager = bounds(profiles["glm5-nvfp4-tp8-sm120-graph-disabled"])
    assert not eager.graphs and eager.describe() == "admits 1024 running requests, decode eager (no CUDA graph)"


def test_historical_seeds_profile_is_eager_with_the_seeds_admission() -> None:
    b = bounds(load_profiles()["glm5-nvfp4-tp8-sm120-seeds-2026-02"])
    assert b.admission == 1024 and not b.graphs  # --disable-cuda-graph, seed 000
