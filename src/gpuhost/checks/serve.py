"""Checks of a serving target and of a running SGLang server: pure functions of what the probe observed.

Shared by the launch role's last steps and ``gpuhost verify serve``. The probe (``gpuhost/tools/serve_probe.py``)
runs on the target and reports answers; these functions judge them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpuhost.checks.finding import Finding, Level, check
from gpuhost.facts.batchlog import BatchLine
from gpuhost.facts.serve import RuntimeFacts

PYTHON_MIN = (3, 11)  # SGLang 0.5.23 requires-python >= 3.11
GLIBC_MIN = (2, 34)  # manylinux_2_34 wheels (sglang 0.5.23, its kernels)


@check(
    "serve.runtime",
    title="Python >= 3.11 and glibc >= 2.34 on the serving target",
    group="serve",
    meaning="SGLang 0.5.23 and its kernel wheels (manylinux_2_34) install only on Python >= 3.11 with glibc >= 2.34.",
    fix="Use a Debian 12 (Python 3.11) / Ubuntu 24.04 (Python 3.12) or newer target (python3, python3-venv); "
    "Ubuntu 22.04's python3 is 3.10.",
)
def check_runtime(facts: RuntimeFacts, subject: str) -> list[Finding]:
    out = []
    if facts.python is None:
        out.append(Finding(Level.FAIL, "serve.runtime", subject, "python3 is not installed", fix="apt install python3"))
    elif facts.python[:2] < PYTHON_MIN:
        have = ".".join(map(str, facts.python))
        out.append(
            Finding(
                Level.FAIL,
                "serve.runtime",
                subject,
                f"python3 is {have}; SGLang needs >= {'.'.join(map(str, PYTHON_MIN))}",
                fix="use a newer distribution on the target",
            )
        )
    else:
        out.append(Finding(Level.PASS, "serve.runtime", subject, f"python {'.'.join(map(str, facts.python))}"))
    if facts.libc != "glibc" or facts.libc_version is None:
        out.append(Finding(Level.FAIL, "serve.runtime", subject, f"C library is {facts.libc or 'unknown'}, not glibc"))
    elif facts.libc_version[:2] < GLIBC_MIN:
        out.append(
            Finding(
                Level.FAIL,
                "serve.runtime",
                subject,
                f"glibc {'.'.join(map(str, facts.libc_version))} is older than "
                f"{'.'.join(map(str, GLIBC_MIN))} (the manylinux_2_34 wheels will not install)",
                fix="use a newer distribution on the target",
            )
        )
    else:
        out.append(Finding(Level.PASS, "serve.runtime", subject, f"glibc {'.'.join(map(str, facts.libc_version))}"))
    return out


@check(
    "serve.unit",
    title="The server's systemd unit is active",
    group="serve",
    meaning="gpuhost-sglang.service is stopped, failed or restarting: nothing serves, whatever launched it last.",
    fix="gpuhost serve logs (why it stopped); gpuhost serve restart -l NODE --ctid CTID, or gpuhost launch sglang.",
)
def check_unit(active: str, subject: str, unit: str = "gpuhost-sglang.service") -> list[Finding]:
    if active == "active":
        return [Finding(Level.PASS, "serve.unit", subject, f"{unit} active")]
    return [
        Finding(
            Level.FAIL,
            "serve.unit",
            subject,
            f"{unit} is {active}",
            cause="the server was stopped, or it exited (a crash shows in its journal)",
            fix="gpuhost serve logs; gpuhost serve restart --limit NODE --ctid CTID",
        )
    ]


@check(
    "serve.health",
    title="/health answers 200",
    group="serve",
    meaning="The server is down, still starting, or unhealthy (its scheduler stopped answering).",
    fix="gpuhost serve status / gpuhost serve logs; gpuhost launch sglang to start it.",
)
def check_health(probe: dict[str, Any], subject: str) -> list[Finding]:
    code = probe.get("health")
    if code == 200:
        return [Finding(Level.PASS, "serve.health", subject, "/health 200")]
    seen = f"/health {code}" if code is not None else f"no answer ({probe.get('error') or 'connection failed'})"
    return [Finding(Level.FAIL, "serve.health", subject, seen, fix="gpuhost serve status; gpuhost serve logs")]


def answer_matches(answer: dict[str, Any]) -> bool:
    """The expected word appears in the content (or, when the content is empty, in the reasoning)."""
    expected = str(answer.get("expected", ""))
    text = answer.get("content") or answer.get("reasoning") or ""
    if not expected or not isinstance(text, str):
        return False
    return re.search(rf"(?<![\w]){re.escape(expected)}(?![\w])", text, re.IGNORECASE) is not None


def _shown(answer: dict[str, Any]) -> str:
    if answer.get("error"):
        return f"error: {str(answer['error'])[:200]}"
    content = answer.get("content")
    return repr(content[:120]) if isinstance(content, str) else "no content"


@check(
    "serve.smoke",
    title="A chat completion returns the checkable answer",
    group="serve",
    meaning="The server answers requests but not correctly (or not at all): it started and does not serve.",
    fix="gpuhost serve logs (a crash at the first real query shows there); try the profile's fallback.",
)
def check_smoke(probe: dict[str, Any], subject: str) -> list[Finding]:
    smoke = probe.get("smoke")
    if not isinstance(smoke, dict):
        return [Finding(Level.FAIL, "serve.smoke", subject, "no smoke completion was made (server not healthy)")]
    if answer_matches(smoke):
        how = " (with reasoning_content)" if smoke.get("reasoning") else ""
        return [Finding(Level.PASS, "serve.smoke", subject, f"smoke answer {smoke['expected']}{how}")]
    return [
        Finding(
            Level.FAIL,
            "serve.smoke",
            subject,
            f"asked {smoke.get('question')!r}, expected {smoke.get('expected')}, got {_shown(smoke)}",
            cause="the first real query failed or returned a wrong answer",
            fix="gpuhost serve logs",
        )
    ]


@check(
    "serve.canary",
    title="Deterministic questions get their known answers at temperature 0",
    group="serve",
    meaning="Wrong answers at temperature 0 mean broken numerics (a bad kernel, KV dtype or checkpoint), "
    "even when the server looks healthy.",
    fix="Check the profile's backends and KV dtype against the validator; try the fallback profile.",
)
def check_canary(probe: dict[str, Any], subject: str) -> list[Finding]:
    canary = probe.get("canary")
    if not isinstance(canary, list) or not canary:
        return [Finding(Level.FAIL, "serve.canary", subject, "no canary questions were asked (server not healthy)")]
    wrong = [a for a in canary if not (isinstance(a, dict) and answer_matches(a))]
    if not wrong:
        return [Finding(Level.PASS, "serve.canary", subject, f"canary {len(canary)}/{len(canary)} correct")]
    first = wrong[0]
    return [
        Finding(
            Level.FAIL,
            "serve.canary",
            subject,
            f"canary {len(canary) - len(wrong)}/{len(canary)} correct; e.g. {first.get('question')!r}: expected "
            f"{first.get('expected')}, got {_shown(first)}",
            cause="the model's output is wrong at temperature 0: numerics, not sampling",
            fix="compare the profile with gpuhost.serve.validate; try the fallback profile; clear the JIT cache",
        )
    ]


@check(
    "serve.logprobs",
    title="Log-probabilities of the canary answers are finite",
    group="serve",
    meaning="NaN or infinite log-probabilities: the seeds' NaN decode crash passed warm-up and died on the first "
    "real query.",
    fix="Use SGLang >= 0.5.17 with the DSA path; try --cuda-graph-backend-decode disabled to tell graph from kernel.",
)
def check_logprobs(probe: dict[str, Any], subject: str) -> list[Finding]:
    canary = probe.get("canary")
    if not isinstance(canary, list) or not canary:
        return [Finding(Level.FAIL, "serve.logprobs", subject, "no log-probabilities (no canary answers)")]
    count = bad = 0
    for a in canary:
        lp = a.get("logprobs") if isinstance(a, dict) else None
        if not isinstance(lp, dict):
            continue
        count += int(lp.get("count") or 0)
        bad += int(lp.get("nonfinite") or 0)
        for key in ("min", "max"):
            v = lp.get(key)
            if isinstance(v, (int, float)) and (not math.isfinite(v) or v > 0):
                bad += 1
    if count == 0:
        return [Finding(Level.FAIL, "serve.logprobs", subject, "the server returned no log-probabilities")]
    if bad:
        return [
            Finding(
                Level.FAIL,
                "serve.logprobs",
                subject,
                f"{bad} of {count} log-probabilities are not finite (or > 0)",
                cause="NaN/inf logits",
                fix="see sglang.log.nan-in-sampling",
            )
        ]
    return [Finding(Level.PASS, "serve.logprobs", subject, f"{count} log-probabilities finite")]


@check(
    "serve.speed",
    title="Single-stream time to first token and tokens/s",
    group="serve",
    meaning="Measured, not judged: one streamed request at temperature 0 (see gpuhost bench sglang for load).",
    fix="-",
)
def check_speed(probe: dict[str, Any], subject: str) -> list[Finding]:
    perf = probe.get("perf")
    if not isinstance(perf, dict):
        return []
    if perf.get("error"):
        return [Finding(Level.WARN, "serve.speed", subject, f"streamed request failed: {perf['error']}")]
    tps = perf.get("tokens_per_s")
    return [
        Finding(
            Level.INFO,
            "serve.speed",
            subject,
            f"TTFT {perf.get('ttft_s')} s, {tps if tps is not None else '-'} tokens/s single stream "
            f"({perf.get('tokens')} tokens)",
        )
    ]


def _same(got: object, want: str) -> bool:
    return str(got).lower() == want.lower()


@check(
    "serve.server-info",
    title="/server_info shows the settings the profile asked for",
    group="serve",
    meaning="SGLang resolved a backend, KV dtype, TP size or version other than the profile's (an 'auto' chose "
    "differently, or another configuration is running).",
    fix="Compare gpuhost serve status with the profile; restart with the profile (gpuhost launch sglang).",
)
def check_server_info(probe: dict[str, Any], expect: dict[str, str], subject: str) -> list[Finding]:
    if not expect:
        return []
    info = probe.get("server_info")
    if not isinstance(info, dict):
        status = probe.get("server_info_status")
        why = f" (HTTP {status})" if isinstance(status, int) else f" ({status})" if status else ""
        # not a pass: nothing the profile pins was seen (a server that died during the checks lands here)
        return [
            Finding(
                Level.FAIL,
                "serve.server-info",
                subject,
                f"/server_info could not be read{why}: the profile's settings are not verified",
                cause="the server stopped answering during the checks, or /server_info is refused",
                fix="gpuhost serve status; gpuhost doctor sglang",
            )
        ]
    wrong = [
        f"{k}={info[k]} (profile: {v})" for k, v in expect.items() if info.get(k) is not None and not _same(info[k], v)
    ]
    if wrong:
        return [
            Finding(
                Level.FAIL,
                "serve.server-info",
                subject,
                "the server resolved " + ", ".join(wrong),
                cause="the running server is not configured as the profile says",
                fix="gpuhost launch sglang --allow-restart",
            )
        ]
    seen = [f"{k}={info[k]}" for k in expect if info.get(k) is not None]
    if not seen:
        return [
            Finding(
                Level.WARN,
                "serve.server-info",
                subject,
                f"/server_info has none of the profile's keys ({', '.join(expect)}): nothing verified",
            )
        ]
    return [Finding(Level.PASS, "serve.server-info", subject, "server_info: " + ", ".join(seen))]


def serve_findings(probe: dict[str, Any], subject: str, expect: dict[str, str] | None = None) -> list[Finding]:
    """Everything ``verify`` mode observed, judged (``expect``: /server_info keys and the profile's values)."""
    out = check_health(probe, subject)
    if probe.get("health") != 200:
        return out
    return (
        out
        + check_smoke(probe, subject)
        + check_canary(probe, subject)
        + check_logprobs(probe, subject)
        + check_server_info(probe, expect or {}, subject)
        + check_speed(probe, subject)
    )


ADMISSION_QUEUEING = "serve.admission-queueing"


def running_bound(info: Mapping[str, Any]) -> int | None:
    """The server's running-request bound from its ``/server_info``: the scheduler's effective one
    (``internal_states[].effective_max_running_requests_per_dp``, summed over DP ranks; sglang 0.5.23
    ``scheduler_components/internal_state.py:73``), else the ``max_running_requests`` argument."""
    states = info.get("internal_states")
    if isinstance(states, list):
        per_dp = [s.get("effective_max_running_requests_per_dp") for s in states if isinstance(s, dict)]
        found = [v for v in per_dp if isinstance(v, int) and not isinstance(v, bool) and v > 0]
        if found:
            return sum(found)
    value = info.get("max_running_requests")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@check(
    ADMISSION_QUEUEING,
    title="Requests waited while every running slot of the server was taken",
    group="serve",
    meaning="SGLang admits at most --max-running-requests requests at once; the rest wait in its queue. The "
    "server's own batch lines since its start (#running-req at the bound, #queue-req above 0) show the load it "
    "met was above that bound: throughput stays flat and the GPUs idle while requests wait (the seeds' bound of "
    "64 was their 880 tok/s plateau at 256 concurrent requests, with the GPUs at 87 W of 600 W).",
    fix="Raise --max-running-requests above the load the server meets (the seeds' 1,024 reached 3,740 tok/s): "
    "`gpuhost tune sglang` measures the running profile against the raised bound and serves the faster one.",
)
def check_admission_queueing(bound: int | None, batches: Sequence[BatchLine], subject: str) -> list[Finding]:
    """WARN when a batch line of this start shows requests waiting with all ``bound`` slots running; PASS when
    batch lines were logged and none does; nothing to judge without a bound or a batch line."""
    if bound is None or not batches:
        return []
    full = waiting_at_bound(batches, bound)
    if not full:
        most = max(b.running for b in batches)
        return [
            Finding(
                Level.PASS,
                ADMISSION_QUEUEING,
                subject,
                f"no request waited at the bound of {bound} ({len(batches)} batch lines, at most {most} running)",
            )
        ]
    worst = full[0]
    return [
        Finding(
            Level.WARN,
            ADMISSION_QUEUEING,
            subject,
            f"{len(full)} of {len(batches)} batch lines since the start show requests waiting with all {bound} "
            f"running slots taken (at most {worst.queued} waiting beside {worst.running} running)",
            cause=f"--max-running-requests {bound}: the server runs at most {bound} requests at once, the "
            f"{worst.running + worst.queued} it met queue above that",
            fix=f"raise --max-running-requests above {worst.running + worst.queued} (gpuhost tune sglang tries the "
            "raised bound against the running profile)",
        )
    ]


def waiting_at_bound(batches: Sequence[BatchLine], bound: int) -> list[BatchLine]:
    """The batch lines with requests waiting while all ``bound`` slots ran, the most waiting first."""
    return sorted((b for b in batches if b.queued > 0 and b.running >= bound), key=lambda b: (-b.queued, b.number))


def tune_levels(batches: Sequence[BatchLine], bound: int) -> str:
    """The concurrency levels a tune of the bound measures: the bound, and the most requests the server met
    (running and waiting) in one batch line of this start."""
    met = max((b.running + b.queued for b in batches), default=bound)
    return f"{bound},{met}" if met > bound else str(bound)
