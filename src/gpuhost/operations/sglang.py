"""Operations of an SGLang server on its target (a container, a VM guest or a bare host: they plan against any
host context): the target checked, the env file written as a secret, the service started with a fresh start
marker, readiness awaited on this start's journal lines only, and the answers proven."""

from __future__ import annotations

import json
import secrets
import time
from typing import TYPE_CHECKING, Any

from pydantic import Field

from gpuhost.checks.finding import Finding, Level
from gpuhost.checks.serve import check_runtime, serve_findings
from gpuhost.core.actions import RestartService, RunCommand, WriteFile
from gpuhost.core.operation import Args, Operation, SkipTask
from gpuhost.core.plan import Plan, nothing, unified_diff
from gpuhost.core.progress import ByteCount, report
from gpuhost.errors import OperationFailed
from gpuhost.facts import files as file_facts
from gpuhost.facts import serve_layout as target
from gpuhost.facts.serve import (
    hf_args,
    hf_snapshot,
    serve_gpus,
    serve_probe,
    serve_runtime,
    serve_service,
    serve_watch,
)
from gpuhost.resources import tool_command
from gpuhost.serve.logscan import LogScanner, Phase

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


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


def failure_text(findings: list[Finding]) -> str:
    parts = []
    for f in findings:
        if f.level >= Level.FAIL:
            parts.append(f.message + (f": {f.cause}" if f.cause else "") + (f" (fix: {f.fix})" if f.fix else ""))
    return "; ".join(parts)


# -- the target ------------------------------------------------------------------------------------


class TargetArgs(Args):
    profile: str = Field(description="the profile to validate on this target")
    profile_dirs: tuple[str, ...] = Field(default=(), description="extra directories or files of user profiles")
    p2p_level: str | None = Field(default=None, description="NCCL_P2P_LEVEL from a verify p2p verdict, if any")
    p2p_available: bool | None = Field(default=None, description="whether verify p2p found P2P working, if known")


class SglangTarget(Operation[TargetArgs]):
    """Python >= 3.11 and glibc >= 2.34 on the target, then the profile validated against its real GPUs and driver.
    Read-only: a FAIL stops the role before anything is installed."""

    kind = "sglang_target"
    Args = TargetArgs

    def plan(self, host: HostContext) -> Plan:
        from pathlib import Path

        from gpuhost.serve.facts import P2pSummary, TargetFacts
        from gpuhost.serve.profile import get_profile
        from gpuhost.serve.validate import refused, validate

        a = self.args
        findings = check_runtime(host.fact(serve_runtime), host.name)
        if any(f.failed for f in findings):
            raise OperationFailed(failure_text(findings))
        gpus = host.fact(serve_gpus)
        if not gpus:
            raise OperationFailed("nvidia-smi shows no GPU on the target (gpuhost verify lxc)")
        profile = get_profile(a.profile, [Path(d) for d in a.profile_dirs])
        p2p = (
            None if a.p2p_available is None else P2pSummary(available=a.p2p_available, data_ok=True, level=a.p2p_level)
        )
        facts = TargetFacts(gpu_archs=[g.arch for g in gpus], driver_version=gpus[0].driver, p2p=p2p)
        verdict = validate(profile, facts)
        if refused(verdict):
            raise OperationFailed(f"profile {profile.name} refused on this target: {failure_text(verdict)}")
        py = ".".join(map(str, host.fact(serve_runtime).python or ()))
        return nothing(
            f"python {py}; profile {profile.name} valid on {len(gpus)}x {gpus[0].arch}, driver {gpus[0].driver}"
        )


# -- the model's weights --------------------------------------------------------------------------


class ModelArgs(Args):
    repo: str = Field(description="Hugging Face repo id (owner/name)")
    revision: str = Field(default="main", description="branch, tag or commit to download")
    cache_dir: str = Field(default=target.HF_CACHE, description="the Hugging Face cache on the target (HF_HUB_CACHE)")
    endpoint: str = Field(default="https://huggingface.co", description="the Hub's URL (HF_ENDPOINT)")
    python: str = Field(description="the python with huggingface_hub that downloads (the profile's venv)")
    token_file: str | None = Field(default=None, description="file on the target (0600) with the token, if any")
    timeout_s: float = Field(default=86400.0, gt=0, description="seconds the download may take")


def _size(n: int) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


class SglangModel(Operation[ModelArgs]):
    """The repository's snapshot complete in the target's Hugging Face cache: every listed file there with its size
    and hash (sha256 of LFS files). Missing or wrong files are downloaded with ``huggingface_hub``'s
    ``snapshot_download`` in the profile's venv (``tools/hf_fetch.py``), after the free space of the cache
    (``df -B1 --output=avail``) was checked against the bytes still missing; then everything is verified again."""

    kind = "sglang_model"
    Args = ModelArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        what = f"{a.repo}@{a.revision}"
        snap = host.fact(hf_snapshot, a.repo, a.revision, a.cache_dir, a.endpoint, a.token_file)
        if snap.error:
            if host.check:
                raise SkipTask(f"check mode: {what} cannot be listed yet: {snap.error}")
            raise OperationFailed(f"{what}: {snap.error}")
        st = snap.status
        commit = str(st.get("commit", "?"))
        if st.get("complete"):
            return nothing(
                f"{what}: snapshot {commit[:12]} complete ({st.get('files')} files, "
                f"{_size(int(st.get('total_bytes', 0)))}; sizes and hashes verified, "
                f"{st.get('lfs_files')} LFS files by sha256)"
            )
        need = int(st.get("missing_bytes", 0))
        free = snap.avail if snap.avail is not None else int(st.get("free_bytes", 0))
        if free < need:
            raise OperationFailed(
                f"{what}: {need} bytes ({_size(need)}) to download, {free} bytes ({_size(free)}) free in "
                f"{a.cache_dir}; nothing was downloaded (free space there, or set sglang_hf_cache to a larger disk)"
            )
        wrong = list(st.get("wrong") or [])
        parts = [f"{len(st.get('missing') or [])} of {st.get('files')} files missing"]
        if wrong:
            shown = ", ".join(f"{w['path']}: {w['why']}" for w in wrong[:3])
            parts.append(f"{len(wrong)} wrong ({shown})")
        fetch = tool_command(
            a.python, "hf_fetch.py", ["fetch", *hf_args(a.repo, a.revision, a.cache_dir, a.endpoint, a.token_file)]
        )
        return Plan(
            reason=f"download {what} with huggingface_hub: {'; '.join(parts)}, "
            f"{_size(need)} to fetch, {_size(free)} free",
            actions=[
                RunCommand(
                    f"mkdir -p {_sh(target.MODEL_RECORD_DIR)} && {fetch}",
                    timeout=a.timeout_s,
                    progress=ByteCount("model download"),
                )
            ],
        )


# -- a file that may hold a secret ----------------------------------------------------------------


class EnvFileArgs(Args):
    dest: str = Field(default=target.ENV_FILE, description="path of the env file on the target")
    content: str = Field(description="the env file's text (rendered from templates/)")
    secret_values: tuple[str, ...] = Field(default=(), description="values shown as <secret> in diffs")

    def __repr__(self) -> str:  # never the secret
        return f"EnvFileArgs(dest={self.dest!r})"


class SecretEnvFile(Operation[EnvFileArgs]):
    """The service's env file, mode 0600; its diff shows every secret value as ``<secret>``."""

    kind = "sglang_env_file"
    Args = EnvFileArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        before = host.fact(file_facts.content, a.dest)
        if before == a.content:
            return nothing(f"{a.dest} already as wanted")

        def hide(text: str | None) -> str | None:
            if text is None:
                return None
            for value in a.secret_values:
                text = text.replace(value, "<secret>")
            return text

        hidden_before = hide(before)
        if before is not None and a.secret_values and hidden_before == before and "SGLANG_API_KEY=" in before:
            hidden_before = "\n".join(
                "SGLANG_API_KEY=<secret>" if ln.startswith("SGLANG_API_KEY=") else ln for ln in before.splitlines()
            )
        diff = unified_diff(a.dest, hidden_before, hide(a.content) or "")
        return Plan(
            reason=f"{'create' if before is None else 'update'} {a.dest}",
            actions=[WriteFile(a.dest, a.content, 0o600, secret=bool(a.secret_values))],
            diff=diff,
        )


# -- the service ----------------------------------------------------------------------------------


class ServiceArgs(Args):
    config_sha256: str = Field(description="sha256 of the rendered launch script, env file and unit")
    profile: str = Field(description="the profile being launched")
    launched: dict[str, Any] = Field(default={}, description="what is recorded about this start (no secrets)")


class SglangService(Operation[ServiceArgs]):
    """The unit runs this configuration. A stopped or failed unit is started; a running one with another
    configuration is restarted only with the operator's consent. Each start gets a fresh marker token."""

    kind = "sglang_service"
    Args = ServiceArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        state = host.fact(serve_service, 0)
        running = state.active in ("active", "activating", "reloading")
        same = state.launched.get("config_sha256") == a.config_sha256
        if running and same:
            return nothing(f"{target.UNIT} runs profile {a.profile} (started {state.launched.get('started_at', '?')})")
        token = secrets.token_hex(16)
        record = {
            **a.launched,
            "profile": a.profile,
            "config_sha256": a.config_sha256,
            "token": token,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "started_epoch": int(time.time()),
        }
        verb = "restart" if running else "start"
        return Plan(
            reason=f"{verb} {target.UNIT} (profile {a.profile})"
            + ("" if running or state.active in ("inactive", "unknown") else f", was {state.active}"),
            actions=[
                WriteFile(target.MARKER_FILE, token + "\n", 0o644, backup=False),
                WriteFile(target.STATE_FILE, json.dumps(record, indent=1, sort_keys=True) + "\n", 0o644, backup=False),
                # a running server restarts only with the operator's consent: the runner decides
                RestartService(target.UNIT, f"systemctl restart {target.UNIT}")
                if running
                else RunCommand(
                    f"systemctl reset-failed {target.UNIT} >/dev/null 2>&1; systemctl restart {target.UNIT}"
                ),
            ],
        )


# -- readiness ------------------------------------------------------------------------------------


class ReadyArgs(Args):
    url: str = Field(description="the server's URL on the target (http://HOST:PORT)")
    config_sha256: str = Field(description="the configuration this start runs (a stale start never counts)")
    timeout_s: float = Field(default=3600.0, description="seconds to wait for readiness")
    capture_timeout_s: float = Field(default=1800.0, description="seconds a CUDA-graph capture may take")
    poll_s: float = Field(default=2.0, description="seconds between polls")
    fallback: str | None = Field(default=None, description="the profile suggested when capture hangs")
    subject: str = Field(default="sglang", description="subject of the findings (the target's name)")
    note: str = Field(default="", description="said with a timeout (a multi-node replica: who rank 0 waits for)")


#: seconds a crash's traceback gets to reach the journal after its first fatal line
CRASH_GRACE_S = 2.0
#: signatures that only say that something died; a specific one seen with them explains it
GENERIC_CRASHES = ("scheduler-crashed", "warmup-failed", "nccl-timeout", "health-check-failed", "python-traceback")


def crash_text(subject: str, scanner: LogScanner, seconds: float) -> str:
    fatal = [h for h in scanner.report() if h.fatal]
    specific = [h for h in fatal if h.signature not in GENERIC_CRASHES] or fatal
    f = specific[0].finding
    also = [h.finding.check for h in fatal if h is not specific[0]]
    return (
        f"{subject} crashed while starting ({PHASE_WORDS[scanner.phases.state.phase]}, {elapsed(seconds)}): "
        f"{f.message}; cause: {f.cause}; fix: {f.fix}" + (f" (also seen: {', '.join(also)})" if also else "")
    )


def elapsed(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class SglangReady(Operation[ReadyArgs]):
    """Wait until ``/health`` answers 200 and this start's journal says ready; fail fast on a crash signature,
    on an exited unit, on a CUDA-graph capture that never ends (the server is stopped), or on the timeout."""

    kind = "sglang_ready"
    Args = ReadyArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        if host.check:
            raise SkipTask(f"check mode: would wait up to {elapsed(a.timeout_s)} for {a.url}/health")
        state = host.fact(serve_service, 0)
        if state.launched.get("config_sha256") != a.config_sha256:
            raise SkipTask("not waited for: the server runs an older configuration (restart pending)")
        token = state.token
        if token is None:
            raise OperationFailed(f"{target.MARKER_FILE} is missing: the server was not started by gpuhost")
        scanner = LogScanner(a.subject)
        fed = 0
        start = time.monotonic()
        phase_since = start
        capture_since: float | None = None
        fatal_since: float | None = None
        ended = False
        shown: Phase | None = None
        last_report = 0.0
        nonce = 0
        while True:
            nonce += 1
            watch = host.fact(serve_watch, a.url, time.monotonic_ns() + nonce)
            now = time.monotonic()
            lines = target.lines_of_start(watch.journal, token)
            passed: list[Phase] = []
            for line in (lines or [])[fed:]:
                scanner.feed(line)
                st = scanner.phases.state
                if shown != st.phase:  # every phase passed through, even between two polls
                    shown, phase_since, last_report = st.phase, now, now
                    passed.append(st.phase)
            fed = len(lines or [])
            st = scanner.phases.state
            if nonce == 1 and lines is not None and watch.health == 200 and st.ready_lines > 0:
                return nothing(f"ready (up already), KV {st.kv_tokens} tokens, {st.graph_captures_done} graph captures")
            for phase in passed:  # a server found ready at the first look shows no start-up it did not have
                report(host.name, f"{a.subject} readiness", PHASE_WORDS[phase], now - start)
            fatal = [h for h in scanner.report() if h.fatal]
            if fatal:
                # the first line of a crash is often the generic one ("Scheduler hit an exception"); its
                # traceback follows: give it one more poll, then name the most specific signature
                fatal_since = fatal_since or now
                if now - fatal_since >= CRASH_GRACE_S or watch.active in ("failed", "inactive"):
                    raise OperationFailed(crash_text(a.subject, scanner, now - start))
            st = scanner.phases.state
            if shown != st.phase:
                shown, phase_since, last_report = st.phase, now, now
                report(host.name, f"{a.subject} readiness", PHASE_WORDS[st.phase], now - start)
            elif now - last_report >= 30:
                last_report = now
                report(
                    host.name,
                    f"{a.subject} readiness",
                    f"{PHASE_WORDS[st.phase]} for {elapsed(now - phase_since)}",
                    now - start,
                    update=True,
                )
            if lines is not None and watch.health == 200 and st.ready_lines > 0:
                kv = f", KV {st.kv_tokens} tokens" if st.kv_tokens else ""
                return nothing(f"ready after {elapsed(now - start)}{kv}, {st.graph_captures_done} graph captures")
            if fatal_since is not None:
                time.sleep(a.poll_s)
                continue
            if watch.active in ("failed", "inactive") and not ended:
                ended = True  # the journal was read before the unit's state: read it once more, complete
                continue
            if watch.active in ("failed", "inactive"):
                tail = "; ".join((lines or [])[-3:]) or "no output"
                raise OperationFailed(f"{target.UNIT} is {watch.active} before it was ready; last lines: {tail}")
            if scanner.phases.capture_in_progress:
                capture_since = capture_since or now
                if now - capture_since > a.capture_timeout_s:
                    return self._hang(host.name, a, now - capture_since)
            else:
                capture_since = None
            if now - start > a.timeout_s:
                raise OperationFailed(
                    f"{a.subject} not ready after {elapsed(a.timeout_s)} (phase: {PHASE_WORDS[st.phase]}, "
                    f"/health {watch.health if watch.health is not None else 'no answer'}); gpuhost serve logs"
                    + (f"; {a.note}" if a.note else "")
                )
            time.sleep(a.poll_s)

    def _hang(self, host_name: str, a: ReadyArgs, seconds: float) -> Plan:
        fix = (
            f"gpuhost launch sglang --profile {a.fallback} --allow-restart"
            if a.fallback
            else "a profile with --cuda-graph-backend-decode breakable or disabled"
        )
        message = (
            f"CUDA graph capture hang: a capture began {elapsed(seconds)} ago and did not end "
            f"(bound {elapsed(a.capture_timeout_s)}); the server was stopped. Fix: {fix}"
        )
        report(host_name, f"{a.subject} readiness", message)
        return Plan(
            reason="capture hang: stop the server",
            actions=[RunCommand(f"systemctl stop {target.UNIT}; printf '%s\\n' {_sh(message)} >&2; exit 3")],
        )


def _sh(text: str) -> str:
    import shlex

    return shlex.quote(text)


# -- serving correctly ----------------------------------------------------------------------------


class VerifyServeArgs(Args):
    url: str = Field(description="the server's URL on the target (http://HOST:PORT)")
    model: str = Field(default="default", description="the served model name")
    expect: dict[str, str] = Field(default={}, description="launch settings /server_info must show")
    config_sha256: str | None = Field(default=None, description="the configuration that must be running")
    timeout_s: float = Field(default=300.0, description="seconds the probe may take")
    subject: str = Field(default="sglang", description="subject of the findings (the target's name)")


class SglangVerify(Operation[VerifyServeArgs]):
    """A smoke completion, the accuracy canary with finite logprobs, TTFT and tokens/s; read-only."""

    kind = "sglang_verify"
    Args = VerifyServeArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        if host.check:
            raise SkipTask("check mode: would ask the smoke and canary questions")
        if a.config_sha256 is not None:
            state = host.fact(serve_service, 0)
            if state.launched.get("config_sha256") != a.config_sha256:
                raise SkipTask("not verified: the server runs an older configuration (restart pending)")
        probe = host.fact(serve_probe, a.url, "verify", a.model, a.timeout_s, time.monotonic_ns())
        findings = serve_findings(probe, a.subject, a.expect)
        if any(f.failed for f in findings):
            raise OperationFailed(failure_text(findings))
        return nothing("; ".join(f.message for f in findings))
