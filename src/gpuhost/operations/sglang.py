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
from gpuhost.checks.serve import check_health, check_runtime, check_server_info, serve_findings
from gpuhost.core.actions import RestartService, RunCommand, Stage, WaitUntil, WriteFile
from gpuhost.core.operation import Args, Operation, SkipTask
from gpuhost.core.plan import Plan, nothing, unified_diff
from gpuhost.core.progress import ByteCount
from gpuhost.errors import OperationFailed
from gpuhost.facts import files as file_facts
from gpuhost.facts import serve_layout as target
from gpuhost.facts.serve import (
    Watch,
    hf_args,
    hf_snapshot,
    serve_gpus,
    serve_probe,
    serve_proof,
    serve_runtime,
    serve_service,
    serve_watch,
    sglang_cache_warm,
)
from gpuhost.resources import tool_command

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


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
        state = host.fact(serve_service)
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
    timeout_s: float = Field(default=3600.0, gt=0, description="seconds to wait for readiness after a restart")
    first_timeout_s: float = Field(
        default=7200.0, gt=0, description="seconds to wait for readiness at a first start (SGLang's cache empty)"
    )
    capture_timeout_s: float = Field(default=1800.0, gt=0, description="seconds the CUDA-graph capture itself may take")
    warmup_timeout_s: float = Field(default=1800.0, gt=0, description="seconds the kernel warm-up may take")
    autotune_timeout_s: float = Field(default=1800.0, gt=0, description="seconds FlashInfer autotune may take")
    first_autotune_timeout_s: float = Field(
        default=3600.0, gt=0, description="seconds FlashInfer autotune may take at a first start (nothing cached)"
    )
    jit_timeout_s: float = Field(default=1800.0, gt=0, description="seconds one kernel's JIT build may take")
    prove: bool = Field(
        default=False, description="read this start's journal even when the full proof passed on it (--prove)"
    )
    poll_s: float = Field(default=2.0, gt=0, description="seconds between polls")
    fallback: str | None = Field(default=None, description="the profile suggested when capture hangs")
    autotune_fallback: str | None = Field(default=None, description="the profile suggested when autotune overruns")
    cache_dir: str = Field(
        default="/root/.cache/sglang",
        description="SGLang's cache on the target (SGLANG_CACHE_DIR): empty = first start",
    )
    subject: str = Field(default="sglang", description="subject of the findings (the target's name)")
    note: str = Field(default="", description="said with a timeout (a multi-node replica: who rank 0 waits for)")


def elapsed(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class SglangReady(Operation[ReadyArgs]):
    """Wait until ``/health`` answers 200 and this start's journal says ready: a wait the runner polls
    (:class:`~gpuhost.core.actions.WaitUntil`, judged by :mod:`gpuhost.serve.readiness`). It fails on a crash
    signature, on an exited unit, on a stage that overruns its bound (warm-up, autotune, a JIT build, the capture:
    the server is stopped), or on the timeout; a first start (SGLang's cache empty) gets the longer bounds."""

    kind = "sglang_ready"
    Args = ReadyArgs

    def plan(self, host: HostContext) -> Plan:
        from functools import partial

        from gpuhost.serve import readiness

        a = self.args
        state = host.fact(serve_service)
        if state.launched.get("config_sha256") not in (a.config_sha256, None) and not host.check:
            raise SkipTask("not waited for: the server runs an older configuration (restart pending)")
        if not a.prove and state.active == "active" and host.fact(serve_proof).proven(a.config_sha256):
            # converged: the full proof passed on this very start, running this configuration (the proof task
            # that follows asks /health and /server_info again)
            return nothing("ready (up already, this start proven before)")
        first = not host.fact(sglang_cache_warm, a.cache_dir)
        now = host.fact(serve_watch, a.url)  # one look: a server that is up already is not waited for
        up = readiness.ready(now, a.subject) if now.active == "active" else None
        if up is not None and state.launched.get("config_sha256") == a.config_sha256:
            return nothing(f"ready (up already), {up.removeprefix('ready, ')}")
        bounds = readiness.Bounds(
            warmup=a.warmup_timeout_s,
            autotune=a.first_autotune_timeout_s if first else a.autotune_timeout_s,
            jit=a.jit_timeout_s,
            capture=a.capture_timeout_s,
            capture_fallback=a.fallback,
            autotune_fallback=a.autotune_fallback,
        )
        timeout = a.first_timeout_s if first else a.timeout_s
        stop = (RunCommand(f"systemctl stop {target.UNIT}"),)
        wait = WaitUntil(
            what=f"{a.subject} ready at {a.url} (/health 200 and this start's 'fired up' line)",
            fact=serve_watch,
            args=(a.url,),
            done=partial(readiness.ready, subject=a.subject),
            failed=partial(readiness.failed, subject=a.subject),
            stage=partial(_stage, subject=a.subject, bounds=bounds, stop=stop),
            explain=partial(readiness.explain, subject=a.subject),
            trail=partial(readiness.trail, subject=a.subject),
            hint="; ".join(p for p in ("gpuhost serve logs", a.note) if p),
            timeout=timeout,
            poll=a.poll_s,
            step=f"{a.subject} readiness",
            bounds=(
                (
                    "a first start: SGLang's cache is empty, so kernels compile and autotune runs from scratch"
                    if first
                    else "a restart: SGLang's cache holds earlier builds"
                ),
                f"warm-up {elapsed(bounds.warmup)}, autotune {elapsed(bounds.autotune)}, each JIT build "
                f"{elapsed(bounds.jit)}, capture {elapsed(bounds.capture)}",
            ),
        )
        return Plan(reason=f"wait for {a.url}/health", actions=[wait])


def _stage(watch: Watch, subject: str, bounds: Any, stop: tuple[RunCommand, ...]) -> Stage:
    """The readiness stage; a stage that overruns its bound stops the server (a hang never ends by itself)."""
    from dataclasses import replace

    from gpuhost.serve import readiness

    found = readiness.stage(watch, subject, bounds)
    return replace(found, on_overrun=stop) if found.bound is not None else found


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
    prove: bool = Field(default=False, description="the full proof even when it passed on this start already (--prove)")


class SglangVerify(Operation[VerifyServeArgs]):
    """A smoke completion, the accuracy canary with finite logprobs, TTFT and tokens/s, and the start it passed on
    recorded (:data:`~gpuhost.facts.serve_layout.PROVED_FILE`). On that same start with the same configuration
    (a converged re-run) the proof is the cheap one, ``/health`` and ``/server_info``, unless ``prove``."""

    kind = "sglang_verify"
    Args = VerifyServeArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        if host.check:
            raise SkipTask("check mode: would ask the smoke and canary questions")
        if a.config_sha256 is not None:
            state = host.fact(serve_service)
            if state.launched.get("config_sha256") != a.config_sha256:
                raise SkipTask("not verified: the server runs an older configuration (restart pending)")
        proof = host.fact(serve_proof) if a.config_sha256 is not None else None
        if proof is not None and not a.prove and proof.proven(a.config_sha256):
            probe = host.fact(serve_probe, a.url, "info", a.model, a.timeout_s)
            findings = check_health(probe, a.subject)
            findings += check_server_info(probe, a.expect, a.subject) if probe.get("health") == 200 else []
            if any(f.failed for f in findings):
                raise OperationFailed(failure_text(findings))
            said = "; ".join(f.message for f in findings)
            return nothing(f"{said}; smoke, canary and logprobs passed on this start already (--prove asks again)")
        probe = host.fact(serve_probe, a.url, "verify", a.model, a.timeout_s)
        findings = serve_findings(probe, a.subject, a.expect)
        if any(f.failed for f in findings):
            raise OperationFailed(failure_text(findings))
        said = "; ".join(f.message for f in findings)
        if proof is None or proof.start is None or proof.proven(a.config_sha256):
            return nothing(said)
        record = json.dumps({"start": proof.start, "config_sha256": a.config_sha256}, sort_keys=True) + "\n"
        # the record is one line of state, not a file an operator edits: no backup
        return Plan(reason=f"{said}; proof recorded", actions=[WriteFile(target.PROVED_FILE, record, 0o644, False)])
