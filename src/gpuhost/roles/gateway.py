"""Role ``smg_gateway``: a serving group's one endpoint, the SGLang Model Gateway (PyPI ``smg``, pinned), on the
node the inventory places it on.

On that node: a venv with ``smg==VERSION`` (uv from ``pip_index_url``, pip as fallback) and verified; an env file
(0600) with the key clients send and the gateway sends to the replicas; a launch script and a systemd unit from
``templates/``; the replica list in its own file (read at start); the service started (a running one with another
configuration restarts only with ``--allow-restart``); then the gateway's live replicas made the group's through
its worker API (adding or removing a replica restarts nothing) and awaited healthy by its own health checks.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuhost.core.task import Task, task
from gpuhost.facts import gateway as gw
from gpuhost.facts import serve_layout
from gpuhost.inventory.models import GatewayHealth, metrics_listen
from gpuhost.operations.command import Command, CommandArgs
from gpuhost.operations.files import Copy, CopyArgs, Template, TemplateArgs
from gpuhost.operations.gateway import (
    GatewayReady,
    GatewayReadyArgs,
    GatewayService,
    GatewayServiceArgs,
    GatewayWorkers,
    GatewayWorkersArgs,
)
from gpuhost.operations.sglang import EnvFileArgs, SecretEnvFile
from gpuhost.operations.systemd import Systemd, SystemdArgs
from gpuhost.roles.base import Role, RoleVars

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

UNIT_TEMPLATE = "gpuhost-smg.service.j2"
ENV_TEMPLATE = "smg.env.j2"
LAUNCH_TEMPLATE = "smg-launch.sh.j2"
INSTALL_TEMPLATE = "smg-install.sh.j2"
TOOLS_VENV = "/opt/gpuhost/sglang/tools"
PYPI = "https://pypi.org/simple"


class FleetMember(BaseModel):
    """One member of a multi-node replica as the loader resolved it, in rank order."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    node: str = Field(description="the node")
    ctid: int = Field(description="the container")
    serve: dict[str, Any] = Field(default_factory=dict, description="its serve: entry (what it runs)")


class FleetReplica(BaseModel):
    """A replica as the inventory loader resolved it (``serving.groups.G.replicas``): ``node``/``ctid`` are rank 0's
    for a multi-node replica."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    node: str = Field(description="the node (rank 0's)")
    ctid: int = Field(description="the container (rank 0's)")
    url: str = Field(description="where the gateway reaches it (rank 0)")
    profile: str = Field(description="its serve: entry's profile")
    model: str | None = Field(None, description="its serve: entry's model (None: the profile's)")
    api_key_env: str | None = Field(None, description="its API key's environment variable")
    api_key_file: str | None = Field(None, description="its API key's file")
    members: list[FleetMember] = Field(default_factory=list, description="a multi-node replica's members by rank")
    dist_init_host: str | None = Field(None, description="where the members reach rank 0 (--dist-init-addr)")

    @property
    def name(self) -> str:
        return f"{self.node}/CT {self.ctid}"

    def rank_of(self, node: str, ctid: int) -> int | None:
        """The member's rank in this multi-node replica (None: not a member)."""
        for r, m in enumerate(self.members):
            if (m.node, m.ctid) == (node, ctid):
                return r
        return None


class FleetGateway(BaseModel):
    """The gateway as the loader resolved it (``host``: the node's address unless written)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    node: str = Field(description="the node it runs on")
    host: str = Field(description="address it listens on")
    port: int = Field(description="its port")
    policy: str = Field(description="routing policy")
    health: GatewayHealth = Field(description="health checks of the replicas")
    retries: int = Field(description="retries on another replica")
    prometheus_port: int | None = Field(None, description="Prometheus port")
    version: str = Field(description="smg release")
    api_key_env: str | None = Field(None, description="its API key's environment variable")
    api_key_file: str | None = Field(None, description="its API key's file")


class FleetGroup(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    replicas: list[FleetReplica] = Field(description="the replicas")
    gateway: FleetGateway | None = Field(None, description="the gateway (None: the replicas on their own)")


class GatewayVars(RoleVars):
    serving: dict[str, FleetGroup] = Field(
        {}, description="the inventory's serving groups (serving.groups, resolved by the loader)"
    )
    sglang_group: str | None = Field(None, description="the serving group to launch or verify (--group)")
    sglang_profile_dirs: list[str] = Field(
        [], description="directories or files of the operator's own profiles (the served model name)"
    )
    pip_index_url: str | None = Field(None, description="package index for the gateway's venv (default: PyPI)")
    smg_ready_timeout: float = Field(
        120.0, gt=0, description="seconds to wait for the gateway to count every replica healthy"
    )
    smg_poll_interval: float = Field(1.0, gt=0, le=60, description="seconds between gateway polls")

    @model_validator(mode="after")
    def _known_group(self) -> GatewayVars:
        if self.sglang_group is not None and self.sglang_group not in self.serving:
            raise ValueError(
                f"sglang_group: no serving group '{self.sglang_group}' in the inventory "
                f"(known: {', '.join(self.serving) or 'none'})"
            )
        return self

    def group(self) -> FleetGroup | None:
        return self.serving.get(self.sglang_group) if self.sglang_group else None


def _served_model(group: FleetGroup, v: GatewayVars) -> str:
    from gpuhost.serve.profile import get_profile, served_model_name

    lead = group.replicas[0]
    return served_model_name(get_profile(lead.profile, [Path(d) for d in v.sglang_profile_dirs]), lead.model)


def smg_command(name: str, g: FleetGateway) -> list[str]:
    """``smg launch`` for the group (without the replicas, which the launch script reads from their file)."""
    h = g.health
    argv = [
        f"{gw.venv_dir(g.version)}/bin/smg",
        "launch",
        "--host",
        g.host,
        "--port",
        str(g.port),
        "--policy",
        g.policy,
        "--health-check-endpoint",
        h.endpoint,
        "--health-check-interval-secs",
        str(h.interval_secs),
        "--health-check-timeout-secs",
        str(h.timeout_secs),
        "--health-failure-threshold",
        str(h.failure_threshold),
        "--health-success-threshold",
        str(h.success_threshold),
    ]
    # smg counts attempts, not retries: --retry-max-retries 3 made 3 attempts (1 + 2 retries) against a worker
    # answering 503, and --disable-retries is "equivalent to setting retry_max_retries=1" (smg 1.13.0 --help)
    argv += ["--disable-retries"] if g.retries == 0 else ["--retry-max-retries", str(g.retries + 1)]
    metrics_host, metrics_port = metrics_listen(g.host, g.port, g.prometheus_port)
    argv += ["--prometheus-host", metrics_host, "--prometheus-port", str(metrics_port)]
    return argv


def gateway_url(g: FleetGateway) -> str:
    return serve_layout.probe_url(g.host, g.port)


def _api_key(name: str, group: FleetGroup) -> str | None:
    from gpuhost.secrets import read_secret

    g, r = group.gateway, group.replicas[0]
    assert g is not None
    if g.api_key_env or g.api_key_file:
        return read_secret(f"serving group {name}: gateway API key", env=g.api_key_env, file=g.api_key_file)
    return read_secret(f"serving group {name}: API key of {r.name}", env=r.api_key_env, file=r.api_key_file)


def template_vars(name: str, group: FleetGroup, v: GatewayVars, api_key: str | None) -> dict[str, Any]:
    g = group.gateway
    assert g is not None
    return {
        "smg": {
            "group": name,
            "version": g.version,
            "venv": gw.venv_dir(g.version),
            "tools_venv": TOOLS_VENV,
            "index_url": shlex.quote(v.pip_index_url or PYPI),
            "unit": gw.unit(name),
            "syslog_id": f"gpuhost-smg-{name}",
            "listen": f"{g.host}:{g.port}",
            "env_file": gw.env_file(name),
            "launch_script": gw.launch_script(name),
            "workers_file": gw.workers_file(name),
            "command": shlex.join(smg_command(name, g)),
            "args": shlex.join(smg_command(name, g)[1:]),
            "api_key": api_key,
        }
    }


def gateway_tasks(host: HostContext, name: str, group: FleetGroup, v: GatewayVars) -> list[Task]:
    g = group.gateway
    assert g is not None
    key = _api_key(name, group)
    shown = template_vars(name, group, v, "<secret>" if key else None)
    env_text = host.render_template(ENV_TEMPLATE, template_vars(name, group, v, key))
    unit_text = host.render_template(UNIT_TEMPLATE, shown)
    script_text = host.render_template(LAUNCH_TEMPLATE, shown)
    config = serve_layout.config_sha256([unit_text, env_text, script_text, g.version])
    urls = tuple(r.url for r in group.replicas)
    url = gateway_url(g)
    install = gw.install_script(g.version)
    dirs = [str(Path(install).parent), str(Path(gw.launch_script(name)).parent), "/etc/gpuhost", gw.STATE_DIR]
    gname = f"gateway {name}"
    return [
        task(
            f"{gname}: gpuhost's directories",
            Command(
                CommandArgs(
                    cmd=f"mkdir -p {shlex.join(dirs)}",
                    unless=" && ".join(f"test -d {shlex.quote(d)}" for d in dirs),
                )
            ),
        ),
        task(
            f"{gname}: install script of smg {g.version}",
            Template(TemplateArgs(src=INSTALL_TEMPLATE, dest=install, mode="0755", vars=shown)),
            tags=("install",),
        ),
        task(
            f"{gname}: venv with smg=={g.version} (verified)",
            Command(CommandArgs(cmd=f"sh {install}", unless=f"sh {install} verify", timeout=1800)),
            tags=("install",),
        ),
        task(
            f"{gname}: {gw.env_file(name)} (0600)",
            SecretEnvFile(EnvFileArgs(dest=gw.env_file(name), content=env_text, secret_values=(key,) if key else ())),
        ),
        task(
            f"{gname}: replicas it starts with ({gw.workers_file(name)})",
            Copy(CopyArgs(dest=gw.workers_file(name), content="\n".join(urls) + "\n", mode="0644")),
        ),
        task(
            f"{gname}: {gw.launch_script(name)}",
            Template(TemplateArgs(src=LAUNCH_TEMPLATE, dest=gw.launch_script(name), mode="0755", vars=shown)),
        ),
        task(
            f"{gname}: {gw.unit(name)}",
            Template(
                TemplateArgs(src=UNIT_TEMPLATE, dest=f"/etc/systemd/system/{gw.unit(name)}", mode="0644", vars=shown)
            ),
        ),
        task(f"{gname}: {gw.unit(name)} enabled", Systemd(SystemdArgs(unit=gw.unit(name), enabled=True))),
        task(
            f"{gname}: smg {g.version} running on {g.host}:{g.port}",
            GatewayService(GatewayServiceArgs(group=name, config_sha256=config)),
        ),
        task(
            f"{gname}: routes to the group's {len(urls)} replicas",
            GatewayWorkers(
                GatewayWorkersArgs(
                    group=name, url=url, replicas=urls, timeout_s=v.smg_ready_timeout, poll_s=v.smg_poll_interval
                )
            ),
        ),
        task(
            f"{gname}: every replica healthy in the gateway",
            GatewayReady(
                GatewayReadyArgs(
                    group=name, url=url, replicas=urls, timeout_s=v.smg_ready_timeout, poll_s=v.smg_poll_interval
                )
            ),
            tags=("verify",),
        ),
    ]


class SmgGateway(Role[GatewayVars]):
    """A serving group's gateway: the real SGLang Model Gateway (``smg``, pinned) as a systemd service on the
    node the inventory names, routing to the group's replicas with its health checks and policy."""

    name = "smg_gateway"
    Vars = GatewayVars
    templates = (UNIT_TEMPLATE, ENV_TEMPLATE, LAUNCH_TEMPLATE, INSTALL_TEMPLATE)
    template_vars = frozenset({"smg"})

    def tasks(self, host: HostContext, v: GatewayVars) -> list[Task]:
        group = v.group()
        if group is None or group.gateway is None or group.gateway.node != host.name:
            return []
        assert v.sglang_group is not None
        return gateway_tasks(host, v.sglang_group, group, v)
