"""Whether an SGLang start is ready, crashed or stuck, judged from one look at it (:class:`~gpuhost.facts.serve.Watch`):
pure functions, so a test feeds them captured journal lines and the runner's wait polls them.

A start is ready when ``/health`` answers 200 and this start's journal says "fired up". It failed when a fatal
signature is in this start's lines, or the unit exited. Where it is gives the stage the wait reports, and each
stage its own bound: loading and allocating, then inside the capture window kernel warm-up, FlashInfer autotune,
JIT compilation and the capture itself (:mod:`gpuhost.serve.logscan.phases`), then HTTP and the warm-up request.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpuhost.core.actions import Stage
from gpuhost.facts import serve_layout as target
from gpuhost.facts.serve import Watch
from gpuhost.serve.logscan import LogScanner, Phase
from gpuhost.serve.logscan.normalize import bar_label, message, split_raw
from gpuhost.serve.logscan.phases import AUTOTUNE, CAPTURE, JIT, WARMUP, PhaseState

PHASE_WORDS = {
    Phase.STARTING: "starting",
    Phase.LOADING_WEIGHTS: "loading weights",
    Phase.WEIGHTS_LOADED: "weights loaded",
    Phase.KV_ALLOCATED: "KV cache allocated",
    Phase.GRAPH_CAPTURE: "CUDA graph capture",
    Phase.GRAPH_CAPTURED: "CUDA graphs captured",
    Phase.HTTP_UP: "HTTP up, warming up",
    Phase.READY: "ready",
}
#: signatures that only say that something died; a specific one seen with them explains it
GENERIC_CRASHES = ("scheduler-crashed", "warmup-failed", "nccl-timeout", "health-check-failed", "python-traceback")
_EXITED = ("failed", "inactive")


@dataclass(frozen=True)
class Bounds:
    """How long each stage of a start may last (seconds), and what to try when one is overrun."""

    warmup: float = 1800.0
    autotune: float = 1800.0
    jit: float = 1800.0
    capture: float = 1800.0
    #: the profile to launch instead when the capture hangs / when autotune overruns (None: advice in words)
    capture_fallback: str | None = None
    autotune_fallback: str | None = None


@lru_cache(maxsize=4)
def scan(watch: Watch, subject: str) -> LogScanner:
    """This start's lines scanned (cached for the few predicates that judge the same reading)."""
    scanner = LogScanner(subject)
    for line in watch.lines or []:
        scanner.feed(line)
    return scanner


def crash_text(subject: str, scanner: LogScanner) -> str:
    """The crash explained by its most specific signature (the generic ones name what else was seen)."""
    fatal = [h for h in scanner.report() if h.fatal]
    specific = [h for h in fatal if h.signature not in GENERIC_CRASHES] or fatal
    f = specific[0].finding
    also = [h.finding.check for h in fatal if h is not specific[0]]
    return (
        f"{subject} crashed while starting ({PHASE_WORDS[scanner.phases.state.phase]}): "
        f"{f.message}; cause: {f.cause}; fix: {f.fix}" + (f" (also seen: {', '.join(also)})" if also else "")
    )


def ready(watch: Watch, subject: str) -> str | None:
    """Ready: ``/health`` 200 and this start's "fired up" line; the message says what it started with."""
    if watch.lines is None or watch.health != 200:
        return None
    st = scan(watch, subject).phases.state
    if st.ready_lines == 0:
        return None
    kv = f", KV {st.kv_tokens} tokens" if st.kv_tokens else ""
    n = st.graph_captures_done
    return f"ready{kv}, {n} graph capture{'' if n == 1 else 's'}"


def failed(watch: Watch, subject: str) -> str | None:
    """Crashed (a fatal signature in this start's lines) or exited before it was ready."""
    if watch.token is None and watch.active in _EXITED:
        return f"{target.MARKER_FILE} is missing and {target.UNIT} is {watch.active}: not started by gpuhost"
    scanner = scan(watch, subject)
    if scanner.fatal:
        return crash_text(subject, scanner)
    if watch.active in _EXITED and watch.lines is not None:
        tail = "; ".join(watch.lines[-3:]) or "no output"
        return f"{target.UNIT} is {watch.active} before it was ready; last lines: {tail}"
    return None


def _name(st: PhaseState) -> str:
    if st.step == WARMUP:
        return "kernel warm-up (in the CUDA graph capture window)"
    if st.step == AUTOTUNE:
        return "FlashInfer autotune"
    if st.step == JIT:
        return f"JIT compilation of {st.jit_module}"
    if st.step == CAPTURE:
        return "CUDA graph capture"
    return PHASE_WORDS[st.phase]


@lru_cache(maxsize=4)
def trail(watch: Watch, subject: str) -> tuple[str, ...]:
    """Every stage this start's lines went through, in order (a stage a look came too late to see included)."""
    if watch.lines is None:
        return ()
    tracker = LogScanner(subject).phases
    out: list[str] = []
    for line in watch.lines:
        for part in split_raw(line):
            label = bar_label(part)
            for text in (label, message(part)):
                if text:
                    tracker.feed(text)
            name = _name(tracker.state)
            if not out or out[-1] != name:
                out.append(name)
    # "ready" is the wait's own end (its message says it); "starting" says nothing once more is known
    return tuple(
        n for n in out if n != PHASE_WORDS[Phase.READY] and (n != PHASE_WORDS[Phase.STARTING] or len(out) == 1)
    )


def stage(watch: Watch, subject: str, bounds: Bounds) -> Stage:
    """Where the start is, with the bound of that stage and what an overrun means."""
    if watch.lines is None:
        return Stage("waiting for this start's first line")
    st = scan(watch, subject).phases.state
    hung = f"{subject}: the server was stopped. Fix:"
    if st.step == WARMUP:
        return Stage(
            "kernel warm-up (in the CUDA graph capture window)",
            bounds.warmup,
            f"{hung} read gpuhost serve logs (a collective that never returns: gpuhost verify p2p)",
        )
    if st.step == AUTOTUNE:
        fix = (
            f"gpuhost launch sglang --profile {bounds.autotune_fallback} --allow-restart (autotune off)"
            if bounds.autotune_fallback
            else "a profile with --disable-flashinfer-autotune"
        )
        return Stage("FlashInfer autotune", bounds.autotune, f"FlashInfer autotune did not finish; {hung} {fix}")
    if st.step == JIT:
        return Stage(
            f"JIT compilation of {st.jit_module}",
            bounds.jit,
            f"a JIT build did not finish; {hung} check nvcc/ninja in the venv and free CPU, then start again "
            "(a finished build is cached)",
        )
    if st.step == CAPTURE:
        fix = (
            f"gpuhost launch sglang --profile {bounds.capture_fallback} --allow-restart"
            if bounds.capture_fallback
            else "a profile with --cuda-graph-backend-decode breakable or disabled"
        )
        return Stage(
            "CUDA graph capture", bounds.capture, f"CUDA graph capture hang: the capture did not end; {hung} {fix}"
        )
    return Stage(PHASE_WORDS[st.phase])


def explain(watch: Watch, subject: str) -> str:
    """What the last look showed (said with a timeout)."""
    words = "no line of this start yet" if watch.lines is None else PHASE_WORDS[scan(watch, subject).phases.state.phase]
    health = watch.health if watch.health is not None else "no answer"
    return f"phase: {words}, /health {health}"
