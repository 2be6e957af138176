"""Where an SGLang server is in its start-up, read from its log lines (0.5.9 and 0.5.23 spellings).

Inside the CUDA-graph capture window ("Capture … CUDA graph begin" to "… end"), SGLang 0.5.23 first warms the
kernels up and runs FlashInfer's autotune, JIT-compiling kernels on first use, and only then captures
(``model_executor/runner/decode_cuda_graph_runner.py`` ``_capture``: ``self.warmup()`` before the batches;
``runner/base_runner.py`` ``_warmup``). The tracker tells these steps apart, so each gets its own bound:

- warm-up: from the begin line (``model_runner_components/cuda_graph_setup.py:759``) until autotune or capture;
- autotune: ``Running FlashInfer autotune with cache: …`` / ``Running FlashInfer autotune (cache reuse DISABLED …``
  (``runner/flashinfer_autotune.py:304,312``) or FlashInfer's ``[Autotuner]: Autotuning process starts ...``
  (flashinfer 0.7.2 ``autotuner/autotuner.py:1048``), until ``FlashInfer autotune completed.``
  (``flashinfer_autotune.py:369``) or ``[Autotuner]: Autotuning process ends`` (``autotuner.py:1071``);
- JIT: FlashInfer's ``Building JIT module NAME; this can take several minutes on first use.`` (flashinfer 0.7.2
  ``jit/core.py:594``, printed only for a cold build) or DeepGEMM's ``Entering DeepGEMM JIT Pre-Compile session``
  / ``Try DeepGEMM JIT Compiling for`` (0.5.23 ``layers/deep_gemm_wrapper/compile_utils.py:170,180``), until the
  next line;
- capture: the ``Capturing batches (bs=… avail_mem=… GB)`` bar (``decode_cuda_graph_runner.py:1343``, TP0 only)
  until the end line. In some versions the bar (or an ``init_cuda_graphs`` frame) is the only sign of a capture.

Once HTTP is up, every capture has ended, whether or not the version printed an end line.
"""

from __future__ import annotations

import re
from enum import IntEnum

from pydantic import BaseModel


class Phase(IntEnum):
    STARTING = 0
    LOADING_WEIGHTS = 1
    WEIGHTS_LOADED = 2
    KV_ALLOCATED = 3
    GRAPH_CAPTURE = 4
    GRAPH_CAPTURED = 5
    HTTP_UP = 6
    READY = 7


_PATTERNS: list[tuple[Phase, re.Pattern[str]]] = [
    (Phase.LOADING_WEIGHTS, re.compile(r"Load weight begin|Loading safetensors checkpoint shards")),
    (Phase.WEIGHTS_LOADED, re.compile(r"Load weight end\.")),
    (Phase.KV_ALLOCATED, re.compile(r"is allocated\..*#tokens: \d+|Memory pool end\.")),
    (Phase.GRAPH_CAPTURE, re.compile(r"(?i)capture .*graph begin")),
    (Phase.GRAPH_CAPTURED, re.compile(r"(?i)capture .*graph end")),
    (Phase.HTTP_UP, re.compile(r"Uvicorn running on http|Starting embedded Granian HTTP/2 server on")),
    (Phase.READY, re.compile(r"The server is fired up and ready to roll!")),
]
_KV_TOKENS = re.compile(r"#tokens: (\d+)")
#: the scheduler's size of the KV pool; versions before 0.4 print no "#tokens:" line, only this one
_MAX_TOTAL_TOKENS = re.compile(r"\bmax_total_num_tokens=(\d+)")
_HTTP = re.compile(r"(?:running on|server on) (https?://\S+)")


#: the steps inside the capture window
WARMUP, AUTOTUNE, JIT, CAPTURE = "warm-up", "autotune", "jit", "capture"
_AUTOTUNE_BEGIN = re.compile(r"Running FlashInfer autotune\b|\[Autotuner\]: Autotuning process starts")
_AUTOTUNE_END = re.compile(r"FlashInfer autotune completed\.|\[Autotuner\]: Autotuning process ends")
_JIT = re.compile(
    r"Building JIT module (\S+); this can take several minutes|Entering DeepGEMM JIT Pre-Compile session"
    r"|Try DeepGEMM JIT Compiling for <(\w+)>"
)
_BAR = re.compile(r"^Capturing batches\b")
_CAPTURE_FRAME = re.compile(r"\bin (?:init_cuda_graphs|init_device_graphs|capture_one_batch_size)$")


class PhaseState(BaseModel):
    phase: Phase = Phase.STARTING
    kv_tokens: int | None = None
    graph_captures_open: int = 0  # "begin" lines without their "end" (a hang shows here)
    graph_captures_done: int = 0
    ready_lines: int = 0  # one per tokenizer worker
    url: str | None = None
    #: inside the capture window: warm-up, autotune, jit or capture (None outside it)
    step: str | None = None
    #: the step a JIT build interrupted (it resumes with the next line)
    resumed: str | None = None
    #: the kernel being JIT-compiled
    jit_module: str | None = None
    #: a cold build was seen (JIT compilation or a fresh autotune): a first start on this target
    cold: bool = False


class PhaseTracker:
    """Feed message lines; :attr:`state` says how far start-up got."""

    def __init__(self) -> None:
        self.state = PhaseState()

    def feed(self, text: str) -> Phase | None:
        """The phase ``text`` marks (``None`` if none); the state only moves forward."""
        self._step(text)
        m = _MAX_TOTAL_TOKENS.search(text)
        if m and self.state.kv_tokens is None:
            self.state.kv_tokens = int(m.group(1))
        for phase, pat in _PATTERNS:
            if not pat.search(text):
                continue
            st = self.state
            if phase is Phase.KV_ALLOCATED:
                m = _KV_TOKENS.search(text)
                st.kv_tokens = int(m.group(1)) if m else st.kv_tokens
            elif phase is Phase.GRAPH_CAPTURE:
                st.graph_captures_open += 1
                st.step = st.step or WARMUP
            elif phase is Phase.GRAPH_CAPTURED:
                st.graph_captures_open = max(0, st.graph_captures_open - 1)
                st.graph_captures_done += 1
                st.step = st.step if st.graph_captures_open else None
            elif phase is Phase.HTTP_UP:
                m = _HTTP.search(text)
                st.url = m.group(1) if m else st.url
                # serving: every capture ended, end line or not (a version without one counts here)
                st.graph_captures_done += st.graph_captures_open
                st.graph_captures_open, st.step = 0, None
            elif phase is Phase.READY:
                st.ready_lines += 1
            st.phase = max(st.phase, phase)
            return phase
        return None

    def _step(self, text: str) -> None:
        """The step inside the capture window that ``text`` starts (or ends)."""
        st = self.state
        if st.step == JIT:  # a JIT build ends with the next line of the log
            st.step, st.resumed, st.jit_module = st.resumed, None, None
        m = _JIT.search(text)
        if m:
            st.cold = True
            st.resumed = st.step
            st.step, st.jit_module = JIT, m.group(1) or m.group(2) or "DeepGEMM kernels"
        elif _AUTOTUNE_BEGIN.search(text):
            st.step = AUTOTUNE
            st.cold = st.cold or "cache reuse DISABLED" in text
        elif _AUTOTUNE_END.search(text):
            st.step = WARMUP if st.graph_captures_open else None
        elif _BAR.search(text) or _CAPTURE_FRAME.search(text):
            st.step = CAPTURE
            st.phase = max(st.phase, Phase.GRAPH_CAPTURE)

    @property
    def capture_in_progress(self) -> bool:
        """A CUDA-graph capture began and has not ended (watch it: a hang stays here)."""
        return self.state.graph_captures_open > 0
