"""Operation scenarios: facts and arguments in, reason, actions and diff out (``scenarios/<operation>/*.yml``).

Each file gives the operation's arguments, the facts of the host (parsed values, or captured command
outputs that the facts' own parsers read: fixture files by path under ``tests/fixtures``), and what
the plan must be. The batched ``host facts`` are written as their probe sections (see
:data:`gpuhost.facts.host.HOST_PROBES`); a probe a scenario leaves out printed nothing and failed,
as a missing file or command does. ``profile`` names a shared set of sections in ``_profiles/``.
Every fact a scenario provides must be asked for, so scenarios stay minimal and honest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gpuhost.core.actions import (
    Action,
    CopyToGuest,
    EditGuestConfig,
    InGuest,
    PveCall,
    RebootHost,
    RestartGuest,
    RunCommand,
    WriteFile,
)
from gpuhost.core.guest import Guest
from gpuhost.core.operation import SkipTask
from gpuhost.errors import GpuhostError
from gpuhost.facts.batch import _MARK
from gpuhost.facts.container import container_facts, container_probes
from gpuhost.facts.host import HOST_PROBES, host_facts
from gpuhost.operations import table
from tests.support.scenario import Captured, ScenarioHost

HERE = Path(__file__).resolve().parent / "scenarios"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FILES = sorted(p for p in HERE.glob("*/*.yml") if not p.parent.name.startswith("_"))
_yaml = YAML(typ="safe")
#: The batched facts whose output a scenario writes as probe sections.
BATCHED = {host_facts.name: HOST_PROBES, container_facts.name: container_probes()}


def _load(path: Path) -> dict[str, Any]:
    return _yaml.load(path.read_text())  # type: ignore[no-any-return]


def text_of(spec: Any) -> str:
    """Inline text, or ``{file: host/grub/x.txt, skip_lines: 1}`` (skip a pasted prompt line)."""
    if spec is None:
        return ""
    if isinstance(spec, str):
        return spec
    text = (FIXTURES / spec["file"]).read_text()
    if spec.get("skip_lines"):
        text = "".join(text.splitlines(keepends=True)[spec["skip_lines"] :])
    return text


def section_of(spec: Any) -> tuple[str, int]:
    """A probe's output and exit status: inline text, ``{file: …}`` or ``{text: …}``, with ``status``."""
    if isinstance(spec, dict):
        return text_of(spec if "file" in spec else spec.get("text", "")), spec.get("status", 0)
    return text_of(spec), 0


def sections_stdout(sections: dict[str, Any], probes: dict[str, str]) -> str:
    """What the batched probe script prints (:func:`gpuhost.facts.batch.sections_command`), probe by probe."""
    unknown = set(sections) - set(probes)
    assert not unknown, f"not among the probes: {sorted(unknown)}"
    out = []
    for key in probes:
        body, status = section_of(sections[key]) if key in sections else ("", 1)
        nl = "" if not body or body.endswith("\n") else "\n"
        out.append(f"{_MARK} {key}\n{body}{nl}{_MARK}-status {status}\n")
    return "".join(out)


def fact_value(entry: dict[str, Any]) -> Any:
    if "value" in entry:
        return entry["value"]
    if "sections" in entry or "profile" in entry:
        sections = dict(_load(HERE / "_profiles" / f"{entry['profile']}.yml")) if "profile" in entry else {}
        sections.update(entry.get("sections") or {})
        sections = {k: v for k, v in sections.items() if v is not None}
        return Captured(sections_stdout(sections, BATCHED[entry["fact"]]))
    return Captured(text_of(entry.get("stdout")), entry.get("exit_code", 0), text_of(entry.get("stderr")))


def guest_of(text: str | int) -> Guest:
    kind, _, gid = str(text).partition("/")
    return Guest("lxc" if kind in ("lxc", "ct") else "qemu", int(gid))  # type: ignore[arg-type]


def build_host(data: dict[str, Any], name: str = "pve1") -> ScenarioHost:
    facts = {(e["fact"], tuple(e.get("args", ()))): fact_value(e) for e in data.get("facts") or []}
    guests = {guest_of(g): build_host(spec, f"{name}/{guest_of(g)}") for g, spec in (data.get("guests") or {}).items()}
    return ScenarioHost(
        facts,
        name=name,
        vars=data.get("vars") or {},
        check=bool(data.get("check")),
        reboot_pending=bool(data.get("reboot_pending")),
        restarts_pending=frozenset(guest_of(g) for g in data.get("restart_pending") or []),
        guests=guests,
    )


def action_data(action: Action) -> dict[str, Any]:
    if isinstance(action, WriteFile):
        out: dict[str, Any] = {"write": action.path}
        if action.mode is not None:
            out["mode"] = oct(action.mode)
        if action.backup_dir:
            out["backup_dir"] = action.backup_dir
        if action.secret:
            out["secret"] = True
        return out
    if isinstance(action, RunCommand):
        out = {"run": action.command}
        if action.timeout is not None:
            out["timeout"] = action.timeout
        if action.ok_codes != (0,):
            out["ok_codes"] = list(action.ok_codes)
        return out
    if isinstance(action, RebootHost):
        return {"reboot": action.reason, **({"record": action.record[0]} if action.record else {})}
    if isinstance(action, PveCall):
        out = {"pve": f"{action.method.upper()} {action.path}"}
        if action.params:
            out["params"] = [f"{k}={v}" for k, v in action.params]
        if action.digest:
            out["digest"] = action.digest
        return out
    if isinstance(action, EditGuestConfig):
        return {
            "edit": action.path,
            "guest": str(action.guest),
            "lock": action.lock,
            "digest": action.digest,
            "backup_dir": action.backup_dir,
        }
    if isinstance(action, RestartGuest):
        return {"restart": str(action.guest), **action_data(action.call)}
    if isinstance(action, InGuest):
        return {"in": str(action.guest), **action_data(action.action)}
    if isinstance(action, CopyToGuest):
        out = {"copy_to": str(action.guest), "source": action.source, "dest": action.dest, "sha256": action.sha256}
        if action.mode is not None:
            out["mode"] = oct(action.mode)
        return out
    raise AssertionError(f"unknown action {action!r}")


def _hosts(host: ScenarioHost) -> list[ScenarioHost]:
    return [host, *(h for g in host.guests.values() for h in _hosts(g))]


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_scenario(path: Path) -> None:
    data = _load(path)
    kind = data.get("operation", path.parent.name)
    cls = table.get(kind)
    assert cls is not None, f"no operation '{kind}'"
    op = cls.from_dict(data.get("args") or {}, table.get)
    host = build_host(data)
    expect = data["expect"]
    if "error" in expect:
        with pytest.raises(GpuhostError) as info:
            op.plan(host)
        assert type(info.value).__name__ == expect["error"]["type"]
        for part in expect["error"]["contains"]:
            assert part in str(info.value)
    elif "skip" in expect:
        with pytest.raises(SkipTask) as skip:
            op.plan(host)
        assert skip.value.reason == expect["skip"]
    else:
        plan = op.plan(host)
        assert plan.reason == expect["reason"]
        assert [action_data(a) for a in plan.actions] == (expect.get("actions") or [])
        assert plan.diff == (expect.get("diff") or "")
    for h in _hosts(host):
        unused = set(h._given) - set(h.asked)
        assert not unused, f"{path.name}: {h.name}: facts provided but never asked for: {sorted(unused)}"


def test_every_proxmox_operation_has_scenarios() -> None:
    have = {p.parent.name for p in FILES}
    wanted = {
        "kernel_cmdline",
        "boot_refresh",
        "reboot_if_needed",
        "nvidia_driver",
        "lxc_container",
        "lxc_devices",
        "lxc_running",
        "lxc_restart",
        "in_container",
        "push_to_guest",
        "verify",
        "in_vm",
        "module_list",
        "systemd",
        "command",
        "reboot",
        "line",
        "copy",
        "vm_running",
        "vm_pending_applied",
        "template",
        "nvidia_installer",
        "vm_gpu_config",
        "vm_cmdline_proof",
        "vm_p2p",
    }
    assert wanted <= have, sorted(wanted - have)
