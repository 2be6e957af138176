"""Role ``sglang``: a container's ``serve:`` entry made real — validated, installed, started, ready, proven.

Per container with a ``serve`` entry (all of the node's, or ``--ctid``): the profile is validated against the
profile's own GPUs before any host is contacted (exit 2), then inside the container: Python and glibc checked and
the profile validated on the real GPUs; a venv per profile with the pinned packages and huggingface_hub (uv, pip as
fallback) and verified; the model (a path on the target, optionally copied from the node once, or a repo id
downloaded with huggingface_hub into the Hugging Face cache and verified, served offline); env file (0600), launch
script and systemd unit from ``templates/``; the service started with a fresh start marker; readiness awaited on this
start's journal lines (crash signatures fail fast, a capture hang stops the server); a smoke completion, the
accuracy canary with finite logprobs, and single-stream speed.

The operations plan against any host context, so a VM guest or a bare host can be a target with a different
wrapping; this role wraps them for LXC containers (``in_container``).
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator, model_validator

from gpuhost.core.task import Task, task
from gpuhost.facts import serve_layout as target
from gpuhost.inventory.models import ContainerSpec, ServeSpec
from gpuhost.inventory.names import safe_name
from gpuhost.operations.command import Command, CommandArgs
from gpuhost.operations.files import Template, TemplateArgs
from gpuhost.operations.lxc import InContainerArgs, InCt
from gpuhost.operations.sglang import (
    EnvFileArgs,
    ModelArgs,
    ReadyArgs,
    SecretEnvFile,
    ServiceArgs,
    SglangModel,
    SglangReady,
    SglangService,
    SglangTarget,
    SglangVerify,
    TargetArgs,
    VerifyServeArgs,
)
from gpuhost.operations.systemd import Systemd, SystemdArgs
from gpuhost.roles.base import Role, RoleVars
from gpuhost.roles.gateway import FleetGroup
from gpuhost.roles.sglang_multinode import (
    Member,
    Stage,
    check_container,
    check_replicas,
    member_of,
    rendezvous_task,
    staged,
)
from gpuhost.serve.facts import P2pSummary

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext
    from gpuhost.serve.profile import Profile

UNIT_TEMPLATE = "gpuhost-sglang.service.j2"
ENV_TEMPLATE = "sglang.env.j2"
LAUNCH_TEMPLATE = "sglang-launch.sh.j2"
INSTALL_TEMPLATE = "sglang-install.sh.j2"
TOOLS_VENV = "/opt/gpuhost/sglang/tools"
PYPI = "https://pypi.org/simple"
HF_HUB = "https://huggingface.co"
#: installed into the profile's venv beside the pins (any version its pins allow): the model download uses it
VENV_REQUIRES = ("huggingface_hub",)


class SglangVars(RoleVars):
    containers: dict[int, ContainerSpec] = Field(
        {}, description="the node's containers (the inventory's nodes.NAME.containers); those with serve: are served"
    )
    lxc_ctids: list[int] | None = Field(None, description="only these containers of the node (--ctid)")
    sglang_profile: str | None = Field(None, description="use this profile instead of serve.profile (--profile)")

    @field_validator("sglang_profile")
    @classmethod
    def _profile_name(cls, v: str | None) -> str | None:
        return None if v is None else safe_name(v, "profile name")

    sglang_group: str | None = Field(
        None, description="only the replicas of this serving group (--group; serving.groups in the inventory)"
    )
    serving: dict[str, FleetGroup] = Field(
        {}, description="the inventory's serving groups (serving.groups, resolved by the loader)"
    )
    sglang_profile_dirs: list[str] = Field(
        [], description="directories or files of the operator's own profiles (a later profile of a name wins)"
    )
    pip_index_url: str | None = Field(None, description="package index for the venv (default: PyPI)")
    sglang_p2p: P2pSummary | None = Field(
        None, description="the gpuhost verify p2p verdict {available, data_ok, level}: sets the NCCL P2P environment"
    )
    sglang_ready_timeout: float = Field(
        3600.0, gt=0, description="seconds to wait for readiness after a restart (load and capture of a 744B model)"
    )
    sglang_first_ready_timeout: float = Field(
        7200.0,
        gt=0,
        description="seconds to wait for readiness at a first start (SGLang's cache empty: every kernel JIT-compiled, "
        "FlashInfer autotune from scratch)",
    )
    sglang_capture_timeout: float = Field(
        1800.0,
        gt=0,
        description="seconds the CUDA-graph capture itself may run before it counts as a hang (warm-up, autotune and "
        "JIT inside the capture window have their own bounds)",
    )
    sglang_warmup_timeout: float = Field(
        1800.0, gt=0, description="seconds the kernel warm-up inside the capture window may run"
    )
    sglang_autotune_timeout: float = Field(
        1800.0, gt=0, description="seconds FlashInfer autotune may run after a restart (its results are cached)"
    )
    sglang_first_autotune_timeout: float = Field(
        3600.0, gt=0, description="seconds FlashInfer autotune may run at a first start"
    )
    sglang_jit_timeout: float = Field(1800.0, gt=0, description="seconds one kernel's JIT build may run")
    sglang_poll_interval: float = Field(2.0, gt=0, le=60, description="seconds between readiness polls")
    sglang_prove: bool = Field(
        False,
        description="the full proof (smoke, canary, logprobs, speed) even on a start it passed on already "
        "(--prove); without it a converged re-run asks /health and /server_info",
    )
    sglang_install_timeout: float = Field(3600.0, gt=0, description="seconds the venv install may take")
    hf_endpoint: str | None = Field(
        None,
        pattern=r"^https?://[^\s'\"$`\\;|&<>]+$",
        description="the Hugging Face Hub a repo id is downloaded from (HF_ENDPOINT; default huggingface.co)",
    )
    sglang_hf_cache: str = Field(
        target.HF_CACHE,
        pattern=r"^/[^\s'\"$`\\;|&<>]*$",
        description="the Hugging Face cache on the target a repo id is downloaded to (the server's HF_HUB_CACHE)",
    )
    sglang_download_timeout: float = Field(86400.0, gt=0, description="seconds the model download may take")
    sglang_stage: Stage = Field(
        "all",
        description="which part of the launch this play runs: all (one-node servers only), or the staged launch "
        "of multi-node replicas: prepare (members installed), rank0 (rank 0 started and listening), followers "
        "(each follower started once it reaches rank 0), serve (one-node servers; readiness and proof on rank 0)",
    )
    sglang_rendezvous_timeout: float = Field(
        900.0, gt=0, description="seconds rank 0 may take after its start to listen on its rendezvous port"
    )
    inventory_hostname: str = Field("", description="the node these variables are for (set by the runner)")

    @model_validator(mode="after")
    def _consistent(self) -> SglangVars:
        from gpuhost.errors import ConfigError

        if self.sglang_group is not None and self.sglang_group not in self.serving:
            raise ValueError(
                f"sglang_group: no serving group '{self.sglang_group}' in the inventory "
                f"(known: {', '.join(self.serving) or 'none'})"
            )
        unknown = sorted(set(self.lxc_ctids or ()) - set(self.containers))
        if unknown:
            raise ValueError(
                f"lxc_ctids: CT {unknown[0]} is not among the node's containers "
                f"({', '.join(map(str, self.containers)) or 'none'})"
            )
        for ctid in self.lxc_ctids or ():
            if self.containers[ctid].serve is None:
                raise ValueError(f"lxc_ctids: CT {ctid} has no serve: entry in the inventory")
        check_replicas(self.serving, self.sglang_group, lambda name: self.profile_for_name(name))
        for ctid, serve in self.selected().items():
            try:
                profile = self.profile_for(serve)
            except ConfigError as exc:
                raise ValueError(f"CT {ctid}: {exc.message}") from None
            refusal = _refusal(profile)
            if refusal:
                raise ValueError(f"CT {ctid}: profile {profile.name} refused: {refusal}")
            if self.inventory_hostname and ctid in self.selected_on(self.inventory_hostname):
                member = self.member(self.inventory_hostname, ctid)
                check_container(self.inventory_hostname, ctid, profile, member, self.sglang_stage, self.lxc_ctids)
        return self

    def member(self, node: str, ctid: int) -> Member | None:
        """The container's place in a multi-node replica (of --group's, or of any group), None: a one-node server."""
        return member_of(self.serving, self.sglang_group, node, ctid)

    def selected(self) -> dict[int, ServeSpec]:
        out = {}
        for ctid, spec in self.containers.items():
            if spec.serve is not None and (not self.lxc_ctids or ctid in self.lxc_ctids):
                out[ctid] = spec.serve
        return out

    def selected_on(self, node: str) -> dict[int, ServeSpec]:
        """The containers of ``node`` served in this run: with --group, only the group's replicas there."""
        chosen = self.selected()
        if self.sglang_group is None:
            return chosen
        mine = {
            ctid
            for r in self.serving[self.sglang_group].replicas
            for n, ctid in ([(m.node, m.ctid) for m in r.members] or [(r.node, r.ctid)])
            if n == node
        }
        return {ctid: serve for ctid, serve in chosen.items() if ctid in mine}

    def profile_for(self, serve: ServeSpec) -> Profile:
        return self.profile_for_name(serve.profile)

    def profile_for_name(self, name: str) -> Profile:
        """The profile a serve: entry naming ``name`` runs (--profile wins)."""
        from gpuhost.serve.profile import get_profile

        return get_profile(self.sglang_profile or name, [Path(d) for d in self.sglang_profile_dirs])


def _refusal(profile: Profile) -> str:
    """The validator on the profile's own GPUs (its architectures x gpus): FAIL findings, before any host."""
    from gpuhost.operations.sglang import failure_text
    from gpuhost.serve.facts import TargetFacts
    from gpuhost.serve.validate import refused, validate

    facts = TargetFacts(
        gpu_archs=[profile.architectures[0]] * profile.gpus if profile.architectures else [], driver_version=None
    )
    findings = validate(profile, facts)
    return failure_text(findings) if refused(findings) else ""


def _flag_value(profile: Profile, *names: str) -> Any:
    for n in names:
        if n in profile.flags:
            return profile.flags[n]
    return None


def server_info_expectation(profile: Profile) -> dict[str, str]:
    """What /server_info must show for this profile: its SGLang version, TP size and pinned backends (the fields
    the serve probe keeps)."""
    from gpuhost.serve.effective import by_dest
    from gpuhost.tools.serve_probe import SERVER_INFO_DESTS

    dests = by_dest(profile)
    out = {"version": profile.pins.sglang, "tp_size": str(profile.tp_size)}
    for d in SERVER_INFO_DESTS:
        value = dests.get(d)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value) != "auto":
            out[d] = str(value)
    return out


def _executable(entry: str, venv: str) -> str:
    if entry.startswith("/"):
        return entry
    if entry in ("python", "python3"):
        return f"{venv}/bin/python3"
    return f"{venv}/bin/{entry}"


class Launch:
    """Everything one container's start is made of, computed once from the variables (no host needed)."""

    def __init__(self, ctid: int, serve: ServeSpec, v: SglangVars, member: Member | None = None) -> None:
        from gpuhost.secrets import read_secret
        from gpuhost.serve.command import render
        from gpuhost.serve.multinode import render_rank

        profile = v.profile_for(serve)
        self.ctid, self.serve, self.profile, self.member = ctid, serve, profile, member
        self.venv = target.venv_dir(profile.name)
        self.model = serve.model or profile.model
        flags = dict(profile.flags)
        if serve.host:
            flags["--host"] = serve.host
        if serve.port:
            flags["--port"] = serve.port
        for key in ("--model-path", "--model", "--revision"):
            flags.pop(key, None)
        self.repo = not self.model.startswith("/")
        if self.repo and serve.model_revision:
            flags["--revision"] = serve.model_revision
        shaped = profile.model_copy(update={"model": self.model, "flags": flags})
        # a member of a multi-node replica: the same command on every node but its --node-rank, rank 0's address
        cmd = (
            render(shaped, v.sglang_p2p)
            if member is None
            else render_rank(shaped, member.rank, member.dist_host, v.sglang_p2p)
        )
        argv = [_executable(cmd.argv[0], self.venv), *cmd.argv[1:]]
        self.argv = argv
        self.argv_sha256 = hashlib.sha256("\0".join(argv).encode()).hexdigest()
        self.host = str(_flag_value(shaped, "--host") or "127.0.0.1")
        self.port = int(_flag_value(shaped, "--port") or 30000)
        self.url = target.probe_url(self.host, self.port)
        served = _flag_value(shaped, "--served-model-name")
        self.served_model = str(served) if served else self.model
        env = {**cmd.env}
        self.hf_cache = v.sglang_hf_cache
        self.hf_endpoint = v.hf_endpoint or HF_HUB
        if self.repo:  # the server reads the downloaded snapshot from the cache, never the network
            env["HF_HUB_OFFLINE"] = "1"
            env["HF_HUB_CACHE"] = self.hf_cache
        self.env = dict(sorted(env.items()))
        what = f"CT {ctid}: serve"
        self.api_key = read_secret(f"{what} API key", env=serve.api_key_env, file=serve.api_key_file)
        self.hf_token = (
            read_secret(f"{what} Hugging Face token", env=serve.hf_token_env, file=serve.hf_token_file)
            if self.repo
            else None
        )
        self.index_url = v.pip_index_url or PYPI
        pins = [f"sglang=={profile.pins.sglang}", f"transformers=={profile.pins.transformers}"]
        if profile.pins.flashinfer:
            pins.append(f"flashinfer-python=={profile.pins.flashinfer}")
        if profile.pins.torch:
            pins.append(f"torch=={profile.pins.torch}")
        if profile.pins.sgl_deep_gemm:
            pins.append(f"sgl-deep-gemm=={profile.pins.sgl_deep_gemm}")
        self.pins = pins
        self.expect = server_info_expectation(shaped)

    def template_vars(self, *, secret: bool) -> dict[str, Any]:
        return {
            "sglang": {
                "profile": self.profile.name,
                "sglang_version": self.profile.pins.sglang,
                "venv": self.venv,
                "tools_venv": TOOLS_VENV,
                "index_url": shlex.quote(self.index_url),
                "pins": self.pins,
                "requires": list(VENV_REQUIRES),
                "env": self.env,
                "api_key": self.api_key if secret else ("<secret>" if self.api_key else None),
                "command": shlex.join(self.argv),
                "argv_sha256": self.argv_sha256,
                "marker_file": target.MARKER_FILE,
                "env_file": target.ENV_FILE,
                "launch_script": target.LAUNCH_SCRIPT,
                "start_limit_interval": 3600,
                "start_limit_burst": 3,
                "restart_sec": 30,
                "stop_timeout": 120,
            }
        }


def container_tasks(
    host: HostContext, ctid: int, serve: ServeSpec, v: SglangVars, member: Member | None = None
) -> list[Task]:
    launch = Launch(ctid, serve, v, member)
    p = launch.profile
    ct = f"CT {ctid}"
    tv = launch.template_vars(secret=False)
    env_text = host.render_template(ENV_TEMPLATE, launch.template_vars(secret=True))
    unit_text = host.render_template(UNIT_TEMPLATE, tv)
    script_text = host.render_template(LAUNCH_TEMPLATE, tv)
    group = [member.token()] if member is not None else []  # a multi-node replica restarts as a whole
    config = target.config_sha256([unit_text, env_text, script_text, *launch.pins, *group])
    install = target.install_script(p.name)
    dirs = [str(Path(install).parent), str(Path(target.ENV_FILE).parent), target.STATE_DIR]

    def inside(op: Any) -> InCt:
        return InCt(InContainerArgs(ctid=ctid, operation=op))

    p2p = v.sglang_p2p
    tasks = [
        task(
            f"{ct}: python, glibc and profile {p.name} on its GPUs",
            inside(
                SglangTarget(
                    TargetArgs(
                        profile=p.name,
                        profile_dirs=tuple(v.sglang_profile_dirs),
                        p2p_available=None if p2p is None else p2p.available,
                        p2p_level=None if p2p is None else p2p.level,
                    )
                )
            ),
        ),
        task(
            f"{ct}: gpuhost's directories",
            inside(
                Command(
                    CommandArgs(
                        cmd=f"mkdir -p {shlex.join(dirs)}",
                        unless=" && ".join(f"test -d {shlex.quote(d)}" for d in dirs),
                    )
                )
            ),
            tags=("always",),  # every other step writes below them, whichever tags are picked
        ),
    ]
    if launch.serve.model_node_dir:
        src, dest = launch.serve.model_node_dir, launch.model
        tasks.append(
            task(
                f"{ct}: model copied from the node's {src}",
                Command(
                    CommandArgs(
                        cmd=(
                            f"test -f {shlex.quote(src)}/config.json && "
                            f"pct exec {ctid} -- mkdir -p {shlex.quote(dest)} && "
                            f"tar -C {shlex.quote(src)} -cf - . | pct exec {ctid} -- tar -C {shlex.quote(dest)} -xf -"
                        ),
                        unless=f"pct exec {ctid} -- test -f {shlex.quote(dest)}/config.json",
                        timeout=v.sglang_install_timeout,
                    )
                ),
                tags=("model",),
            )
        )
    tasks += [
        task(
            f"{ct}: install script of {p.name}",
            inside(Template(TemplateArgs(src=INSTALL_TEMPLATE, dest=install, mode="0755", vars=tv))),
            tags=("install",),
        ),
        task(
            f"{ct}: venv with {', '.join(launch.pins)} (verified)",
            inside(
                Command(
                    CommandArgs(
                        cmd=f"sh {shlex.quote(install)}",
                        unless=f"sh {shlex.quote(install)} verify",
                        timeout=v.sglang_install_timeout,
                    )
                )
            ),
            tags=("install",),
        ),
        *_model_tasks(launch, inside, v),
        task(
            f"{ct}: {target.ENV_FILE} (0600)",
            inside(
                SecretEnvFile(EnvFileArgs(content=env_text, secret_values=(launch.api_key,) if launch.api_key else ()))
            ),
        ),
        task(
            f"{ct}: {target.LAUNCH_SCRIPT}",
            inside(Template(TemplateArgs(src=LAUNCH_TEMPLATE, dest=target.LAUNCH_SCRIPT, mode="0755", vars=tv))),
        ),
        task(
            f"{ct}: {target.UNIT}",
            inside(Template(TemplateArgs(src=UNIT_TEMPLATE, dest=target.UNIT_FILE, mode="0644", vars=tv))),
        ),
        task(f"{ct}: {target.UNIT} enabled", inside(Systemd(SystemdArgs(unit=target.UNIT, enabled=True)))),
    ]
    m = launch.member
    launched: dict[str, Any] = {
        "model": launch.model,
        "url": launch.url,
        "served_model": launch.served_model,
        "argv_sha256": launch.argv_sha256,
        "sglang": p.pins.sglang,
        "expect": launch.expect,
    }
    if m is not None:
        launched["multinode"] = {"rank": m.rank, "nnodes": m.nnodes, "rank0": m.rank0, "group": m.group}
    from gpuhost.serve.bounds import bounds

    chosen = bounds(launch.profile).describe()
    service = task(
        f"{ct}: server running profile {p.name}" + (f" (rank {m.rank} of {m.nnodes})" if m else "") + f": {chosen}",
        inside(SglangService(ServiceArgs(config_sha256=config, profile=p.name, launched=launched))),
    )
    proof = [
        task(
            f"{ct}: ready ({launch.url}/health)",
            inside(
                SglangReady(
                    ReadyArgs(
                        url=launch.url,
                        config_sha256=config,
                        timeout_s=v.sglang_ready_timeout,
                        first_timeout_s=v.sglang_first_ready_timeout,
                        capture_timeout_s=v.sglang_capture_timeout,
                        warmup_timeout_s=v.sglang_warmup_timeout,
                        autotune_timeout_s=v.sglang_autotune_timeout,
                        first_autotune_timeout_s=v.sglang_first_autotune_timeout,
                        jit_timeout_s=v.sglang_jit_timeout,
                        poll_s=v.sglang_poll_interval,
                        prove=v.sglang_prove,
                        fallback=_fallback(p, v, autotune=False),
                        autotune_fallback=_fallback(p, v, autotune=True),
                        cache_dir=p.env.get("SGLANG_CACHE_DIR", "/root/.cache/sglang"),
                        subject=f"{ct} sglang",
                        note=(
                            f"rank 0 is ready only once every follower ({', '.join(m.followers)}) joined it"
                            if m
                            else ""
                        ),
                    )
                )
            ),
            tags=("verify",),
        ),
        task(
            f"{ct}: serves correctly (smoke, canary, logprobs, speed)",
            inside(
                SglangVerify(
                    VerifyServeArgs(
                        url=launch.url,
                        model=launch.served_model,
                        expect=launch.expect,
                        config_sha256=config,
                        subject=f"{ct} sglang",
                        prove=v.sglang_prove,
                    )
                )
            ),
            tags=("verify",),
        ),
    ]
    meet = (
        None
        if m is None
        else rendezvous_task(m, launch.profile, ct, config, v.sglang_rendezvous_timeout, v.sglang_poll_interval, inside)
    )
    return staged(v.sglang_stage, m, tasks, service, proof, meet)


def _model_tasks(launch: Launch, inside: Any, v: SglangVars) -> list[Task]:
    """A path: it must hold config.json. A repo id: the token's file (when the inventory gives a token), then the
    snapshot downloaded with huggingface_hub into the cache and verified (``sglang_model``)."""
    ct = f"CT {launch.ctid}"
    if not launch.repo:
        return [
            task(
                f"{ct}: model {launch.model} on the target",
                inside(
                    Command(
                        CommandArgs(
                            cmd=(
                                f"echo 'model {launch.model}: no config.json there (put it there, set "
                                "model_node_dir, or give a repo id)' >&2; exit 1"
                            ),
                            unless=f"test -f {shlex.quote(launch.model)}/config.json",
                        )
                    )
                ),
                tags=("model",),
            )
        ]
    out = []
    if launch.hf_token:
        out.append(
            task(
                f"{ct}: {target.HF_TOKEN_FILE} (0600)",
                inside(
                    SecretEnvFile(
                        EnvFileArgs(
                            dest=target.HF_TOKEN_FILE, content=launch.hf_token + "\n", secret_values=(launch.hf_token,)
                        )
                    )
                ),
                tags=("model",),
            )
        )
    revision = launch.serve.model_revision or "main"
    out.append(
        task(
            f"{ct}: model {launch.model}@{revision} in {launch.hf_cache} (huggingface_hub, verified)",
            inside(
                SglangModel(
                    ModelArgs(
                        repo=launch.model,
                        revision=revision,
                        cache_dir=launch.hf_cache,
                        endpoint=launch.hf_endpoint,
                        python=f"{launch.venv}/bin/python3",
                        token_file=target.HF_TOKEN_FILE if launch.hf_token else None,
                        timeout_s=v.sglang_download_timeout,
                    )
                )
            ),
            tags=("model",),
        )
    )
    return out


#: the flag an autotune-off fallback profile adds (0.5.23 arg_groups/fields/exec_.py: disable_flashinfer_autotune)
AUTOTUNE_OFF = "--disable-flashinfer-autotune"


def _fallback(profile: Profile, v: SglangVars, *, autotune: bool) -> str | None:
    """The profile to launch instead: with ``autotune``, the fallback that turns FlashInfer autotune off (an
    autotune that overruns); otherwise one that keeps autotune as this profile has it (a capture that hangs)."""
    from gpuhost.serve.profile import load_profiles

    own = bool(profile.flags.get(AUTOTUNE_OFF))
    for other in load_profiles([Path(d) for d in v.sglang_profile_dirs]).values():
        if other.fallback_of == profile.name and (bool(other.flags.get(AUTOTUNE_OFF)) and not own) == autotune:
            return other.name
    return None


class Sglang(Role[SglangVars]):
    """GLM-5-NVFP4 served by SGLang in a GPU container: the profile validated before anything is installed,
    a uv venv with the pinned packages, the model on the target, a systemd unit from templates/, readiness
    from this start's log lines only, then proof that it answers correctly."""

    name = "sglang"
    Vars = SglangVars
    templates = (UNIT_TEMPLATE, ENV_TEMPLATE, LAUNCH_TEMPLATE, INSTALL_TEMPLATE)
    template_vars = frozenset({"sglang"})

    def tasks(self, host: HostContext, v: SglangVars) -> list[Task]:
        out: list[Task] = []
        for ctid, serve in v.selected_on(host.name).items():
            out += container_tasks(host, ctid, serve, v, v.member(host.name, ctid))
        return out
