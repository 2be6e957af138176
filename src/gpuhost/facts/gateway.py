"""What a serving group's gateway shows on its host: its unit, the configuration it was started with, and what the
SGLang Model Gateway itself reports (``/health``, ``/workers``, requests through it). Read-only; what smg reports
is live (never cached: each ask reads anew)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.facts.batch import parse_sections, sections_command
from gpuhost.facts.tool_output import last_json_object
from gpuhost.resources import tool_command

STATE_DIR = "/var/lib/gpuhost/smg"
ROOT = "/opt/gpuhost/smg"


def unit(group: str) -> str:
    return f"gpuhost-smg-{group}.service"


def env_file(group: str) -> str:
    return f"/etc/gpuhost/smg-{group}.env"


def workers_file(group: str) -> str:
    return f"/etc/gpuhost/smg-{group}.workers"


def launch_script(group: str) -> str:
    return f"{ROOT}/{group}/launch.sh"


def state_file(group: str) -> str:
    return f"{STATE_DIR}/{group}.json"


def venv_dir(version: str) -> str:
    return f"{ROOT}/{version}/venv"


def install_script(version: str) -> str:
    return f"{ROOT}/{version}/install.sh"


@dataclass(frozen=True)
class GatewayService:
    active: str
    config_sha256: str | None


def parse_service(result: CommandResult, *_args: Any) -> GatewayService:
    s = parse_sections(result.stdout)
    active = s["active"].output.strip().splitlines()[-1] if "active" in s and s["active"].output.strip() else "unknown"
    sha = None
    if "state" in s and s["state"].ok:
        try:
            loaded = json.loads(s["state"].output)
            sha = loaded.get("config_sha256") if isinstance(loaded, dict) else None
        except ValueError:
            sha = None
    return GatewayService(active, sha)


def _service_command(group: str) -> str:
    return sections_command({"active": f"systemctl is-active {unit(group)}", "state": f"cat {state_file(group)}"})


#: args: group
gateway_service: Fact[GatewayService] = Fact("smg service", _service_command, parse_service)


def probe_command(url: str, mode: str, group: str, extra: tuple[str, ...] = ()) -> str:
    """The gateway probe with its arguments, run by the host's python3."""
    return tool_command("python3", "gateway_probe.py", [url, mode, "--env-file", env_file(group), *extra])


def parse_probe(result: CommandResult, *_args: Any) -> dict[str, Any]:
    data = last_json_object(result.stdout)
    if data is None:
        return {"health": None, "workers": None, "error": f"probe failed (exit {result.exit_code})"}
    return data


def _state_command(url: str, group: str) -> str:
    return probe_command(url, "state", group)


#: args: gateway URL, group: {"health", "workers": [{"url", "id", "healthy", "status"}] | None, "error"}
gateway_state: Fact[dict[str, Any]] = Fact("smg state", _state_command, parse_probe, live=True)


def _spread_command(url: str, group: str, model: str, n: int, replicas: tuple[str, ...]) -> str:
    extra = ["--model", model, "--requests", str(n)]
    for r in replicas:
        extra += ["--replica", r]
    return probe_command(url, "spread", group, tuple(extra))


#: args: gateway URL, group, model, requests, replica URLs: {"statuses", "served": {URL: N|None}, "answers"}
gateway_spread: Fact[dict[str, Any]] = Fact("requests through smg", _spread_command, parse_probe)
