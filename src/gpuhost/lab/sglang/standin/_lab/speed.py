"""SIMULATED decode speed: how the stand-in's time per token responds to the launch settings ``gpuhost tune`` searches.

Every number here is made up. Nothing is measured on a GPU; the model only has the *direction* of each effect
that the seed story and SGLang's code describe, so that a search over the settings has something to find. The
lab proves the mechanism (variants validated, launched, proven, benched, the best kept, failures rolled back),
never the figures.

The model, per generated token of one request (``config.itl()`` is the base time, 4 ms unless the lab sets it):

- admission: only ``--max-running-requests`` requests decode at once, the rest queue (modelled in
  ``server.State``, after sglang 0.5.23 managers/scheduler.py:4121); so tok/s rises with the bound up to the
  client's concurrency and is flat above it.
- CUDA graphs: a decode step replays a captured graph when the running batch is within the capture bound
  (sglang 0.5.23 model_executor/cuda_graph_runner.py ``can_run_graph``: ``bs <= max_bs``) and graphs are on;
  an eager step pays a launch overhead that is large at small batch and amortised at large batch:
  ``EAGER_OVERHEAD * min(1, EAGER_AMORTISED_AT / batch)``.
- radix cache (``--disable-radix-cache``): neutral. The bench's random prompts share no prefix, so the prefix
  cache never hits (sglang 0.5.23 mem_cache/radix_cache.py ``match_prefix``).
- MoE runner: FlashInfer's autotuner picks the fastest CUTLASS tactic at start-up (sglang 0.5.23
  layers/moe/flashinfer_autotune.py); with ``--disable-flashinfer-autotune`` the default tactic is
  ``UNTUNED_MOE`` slower, and a non-FlashInfer runner (``triton``) ``TRITON_MOE`` slower.

Power follows utilisation without more code here: the lab's ``nvidia-smi`` draws watts from the requests in
flight (``load.GpuLoad``), so a variant that admits more requests draws more.

A lab fault per variant (``config.variant_faults``) can make one variant *fast but wrong* (its decode
``FAST_WRONG`` times the modelled time and every answer garbage, as a broken kernel that skips work would) or
make it crash at start-up; see ``docs/tune.md``.
"""

from __future__ import annotations

import argparse

EAGER_OVERHEAD = 0.5
EAGER_AMORTISED_AT = 16
UNTUNED_MOE = 0.25
TRITON_MOE = 0.5
FAST_WRONG = 0.5
#: the batch sizes the stand-in captures (startup.capture), so the largest graph is 256 at most
CAPTURE_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 96, 128, 160, 192, 224, 256)


def capture_bound(args: argparse.Namespace) -> int:
    """The largest decode batch a graph was captured for; 0 when graphs are off."""
    if bool(getattr(args, "disable_cuda_graph", False)) or getattr(args, "cuda_graph_backend_decode", None) == (
        "disabled"
    ):
        return 0
    max_bs = getattr(args, "cuda_graph_max_bs_decode", None) or getattr(args, "cuda_graph_max_bs", None) or 256
    return max([b for b in CAPTURE_SIZES if b <= int(max_bs)] or [0])


def factor(args: argparse.Namespace, batch: int, fast_wrong: bool = False) -> float:
    """The simulated time per token of a request in a decode batch of ``batch``, as a multiple of the base."""
    batch = max(1, batch)
    f = 1.0
    if batch > capture_bound(args):
        f += EAGER_OVERHEAD * min(1.0, EAGER_AMORTISED_AT / batch)
    runner = str(getattr(args, "moe_runner_backend", None) or "auto")
    if runner == "triton":
        f += TRITON_MOE
    elif bool(getattr(args, "disable_flashinfer_autotune", False)):
        f += UNTUNED_MOE
    if fast_wrong:
        f *= FAST_WRONG
    return f
