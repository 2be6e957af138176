"""Where an SGLang server is in its start-up, read from its log lines (0.5.9 and 0.5.23 spellings)."""

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
_HTTP = re.compile(r"(?:running on|server on) (https?://\S+)")


class PhaseState(BaseModel):
    phase: Phase = Phase.STARTING
    kv_tokens: int | None = None
    graph_captures_open: int = 0  # "begin" lines without their "end" (a hang shows here)
    graph_captures_done: int = 0
    ready_lines: int = 0  # one per tokenizer worker
    url: str | None = None


class PhaseTracker:
    """Feed message lines; :attr:`state` says how far start-up got."""

    def __init__(self) -> None:
        self.state = PhaseState()

    def feed(self, text: str) -> Phase | None:
        """The phase ``text`` marks (``None`` if none); the state only moves forward."""
        for phase, pat in _PATTERNS:
            if not pat.search(text):
                continue
            st = self.state
            if phase is Phase.KV_ALLOCATED:
                m = _KV_TOKENS.search(text)
                st.kv_tokens = int(m.group(1)) if m else st.kv_tokens
            elif phase is Phase.GRAPH_CAPTURE:
                st.graph_captures_open += 1
            elif phase is Phase.GRAPH_CAPTURED:
                st.graph_captures_open = max(0, st.graph_captures_open - 1)
                st.graph_captures_done += 1
            elif phase is Phase.HTTP_UP:
                m = _HTTP.search(text)
                st.url = m.group(1) if m else st.url
            elif phase is Phase.READY:
                st.ready_lines += 1
            st.phase = max(st.phase, phase)
            return phase
        return None

    @property
    def capture_in_progress(self) -> bool:
        """A CUDA-graph capture began and has not ended (watch it: a hang stays here)."""
        return self.state.graph_captures_open > 0
