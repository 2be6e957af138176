"""A profile's admission bound and decode graph-capture bound: the two limits a launch chose, said in words.

SGLang 0.5.23 schedules a request only while fewer than ``--max-running-requests`` run; the rest wait in its queue
(``managers/scheduler.py:4121``: ``get_num_allocatable_reqs(...) <= 0`` marks the batch full). It captures decode
CUDA graphs for batch sizes up to ``--cuda-graph-max-bs-decode`` and runs a larger batch eager
(``model_executor/runner/decode_cuda_graph_runner.py`` ``can_run_graph``: ``cuda_graph_bs <= self.max_bs``), and it
never captures above the admission bound (``runner/base_cuda_graph_runner.py:96``, clamped to the request pool).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuhost.serve.effective import by_dest
from gpuhost.serve.profile import Profile


@dataclass(frozen=True)
class Bounds:
    admission: int | None  #: --max-running-requests; None: SGLang sizes it from the KV pool
    capture: int | None  #: --cuda-graph-max-bs-decode; None: SGLang's default list
    graphs: bool  #: False when decode graphs are disabled

    def describe(self) -> str:
        admits = (
            f"admits {self.admission} running requests"
            if self.admission is not None
            else "admission sized by SGLang from its KV pool"
        )
        if not self.graphs:
            return f"{admits}, decode eager (no CUDA graph)"
        if self.capture is None:
            return f"{admits}, decode graphs at SGLang's default sizes"
        return f"{admits}, decode graphs up to batch {self.capture}"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def bounds(profile: Profile) -> Bounds:
    dests = by_dest(profile)
    backend = dests.get("cuda_graph_backend_decode")
    graphs = backend != "disabled" and dests.get("disable_cuda_graph") is not True
    return Bounds(_int(dests.get("max_running_requests")), _int(dests.get("cuda_graph_max_bs_decode")), graphs)
