"""Load ``playbooks/*.yml``: a list of plays, Ansible-shaped.

::

    - name: modules for the VM path
      hosts: gpu_nodes            # 'all', a group, a node, or a comma list
      vars: {vfio_ids: [10de:2bb5]}
      roles: [proxmox_host]       # or {role: proxmox_host, vars: {...}}
      tasks:
        - name: vfio modules at boot
          module_list: {modules: [vfio, vfio_pci]}
          notify: update initramfs
          tags: [vfio]
      handlers:
        - name: update initramfs
          command: {cmd: update-initramfs -u -k all}

This module checks the document's shape; :mod:`gpuhost.runner.prepare` then checks it against the
inventory (hosts, variables, templates, secrets) — all before any host is contacted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuhost import yamlfile
from gpuhost.core.operation import Operation
from gpuhost.errors import PlaybookError
from gpuhost.operations import table as operations
from gpuhost.playbook.models import Play, Playbook, RoleRef, TaskSpec
from gpuhost.playbook.variables import Layer, Origin
from gpuhost.roles.table import get_role, role_names

_PLAY_KEYS = {"name", "hosts", "vars", "roles", "tasks", "handlers", "serial"}
_TASK_KEYS = {"name", "tags", "notify"}


class _Doc:
    """The document and helpers that turn a location into a :class:`PlaybookError`."""

    def __init__(self, path: Path, data: Any) -> None:
        self.path, self.data = path, data

    def origin(self, loc: list[str | int]) -> Origin:
        return Origin(str(self.path), self.data, tuple(loc))

    def error(self, msg: str, loc: list[str | int], field: str | None = None) -> PlaybookError:
        return PlaybookError(msg, file=str(self.path), line=yamlfile.line_of(self.data, loc), field=field)


def _str_list(doc: _Doc, value: Any, what: str, loc: list[str | int]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise doc.error(f"{what} must be a string or a list of strings", loc, field=what)


def _task(doc: _Doc, raw: Any, loc: list[str | int]) -> TaskSpec:
    if not isinstance(raw, dict):
        raise doc.error("a task must be a mapping", loc)
    if "meta" in raw:
        if raw["meta"] != "flush_handlers" or set(raw) - {"meta", "name"}:
            raise doc.error("the only meta task is '- meta: flush_handlers'", [*loc, "meta"], field="meta")
        return TaskSpec(name="flush handlers", kind="meta", args={}, origin=doc.origin(loc))
    ops = [k for k in raw if k not in _TASK_KEYS]
    if len(ops) != 1:
        found = ", ".join(map(str, ops)) if ops else "none"
        raise doc.error(
            f"a task needs exactly one operation (found: {found}); known operations: " + ", ".join(operations.kinds()),
            loc,
        )
    kind = ops[0]
    if not isinstance(kind, str) or operations.get(kind) is None:
        raise doc.error(
            f"unknown operation '{kind}'; known: {', '.join(operations.kinds())}", [*loc, kind], field=str(kind)
        )
    args = raw[kind]
    if isinstance(args, str) and kind == "command":
        args = {"cmd": args}
    if not isinstance(args, dict):
        raise doc.error(f"arguments of '{kind}' must be a mapping", [*loc, kind], field=kind)
    name = raw.get("name") or kind
    if not isinstance(name, str):
        raise doc.error("must be a string", [*loc, "name"], field="name")
    spec = TaskSpec(
        name=name,
        kind=kind,
        args=dict(args),
        origin=doc.origin([*loc, kind]),
        tags=_str_list(doc, raw.get("tags"), "tags", [*loc, "tags"]),
        notify=_str_list(doc, raw.get("notify"), "notify", [*loc, "notify"]),
    )
    if not spec.templated:
        build_operation(spec, spec.args)  # argument errors now; templated ones once variables are known
    return spec


def build_operation(spec: TaskSpec, args: dict[str, Any]) -> Operation[Any]:
    """The task's operation from (rendered) arguments, or a PlaybookError naming the line and field."""
    cls = operations.get(spec.kind)
    assert cls is not None  # checked when the task was read
    try:
        return cls.from_dict(args, operations.get)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [p for p in first["loc"] if not (isinstance(p, str) and "[" in p)]
        msg = "unknown field" if first["type"] == "extra_forbidden" else str(first["msg"]).removeprefix("Value error, ")
        raise PlaybookError(
            msg, file=spec.origin.file, line=spec.origin.line(loc), field=".".join(str(p) for p in (spec.kind, *loc))
        ) from None
    except (ValueError, TypeError) as exc:
        raise PlaybookError(str(exc), file=spec.origin.file, line=spec.origin.line(), field=spec.kind) from None


def _role_ref(doc: _Doc, raw: Any, loc: list[str | int]) -> RoleRef:
    if isinstance(raw, str):
        ref = RoleRef(raw, origin=doc.origin(loc))
    elif isinstance(raw, dict) and isinstance(raw.get("role"), str) and set(raw) <= {"role", "vars"}:
        variables = raw.get("vars") or {}
        if not isinstance(variables, dict):
            raise doc.error("must be a mapping", [*loc, "vars"], field="vars")
        ref = RoleRef(
            raw["role"], Layer.from_yaml(variables, str(doc.path), doc.data, [*loc, "vars"]), origin=doc.origin(loc)
        )
    else:
        raise doc.error("a role is a name or {role: NAME, vars: {...}}", loc, field="roles")
    if get_role(ref.name) is None:
        raise doc.error(f"unknown role '{ref.name}' (known: {', '.join(role_names())})", loc, field="roles")
    return ref


def _handlers_unique(doc: _Doc, handlers: list[TaskSpec], i: int) -> None:
    seen: set[str] = set()
    for j, h in enumerate(handlers):
        if h.name in seen:
            raise doc.error(f"two handlers are named '{h.name}'", [i, "handlers", j, "name"], field="name")
        seen.add(h.name)


def load_playbook(path: str | Path) -> Playbook:
    """Parse and check a playbook's shape; nothing touches a host before this (and prepare) succeed."""
    path = Path(path)
    data = yamlfile.load(path, PlaybookError)
    doc = _Doc(path, data)
    if not isinstance(data, list) or not data:
        raise PlaybookError("a playbook is a non-empty list of plays", file=str(path), line=1)
    plays = []
    for i, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise doc.error("a play must be a mapping", [i])
        unknown = sorted(str(k) for k in set(raw) - _PLAY_KEYS)
        if unknown:
            raise doc.error("unknown field", [i, unknown[0]], field=unknown[0])
        hosts = raw.get("hosts")
        if not isinstance(hosts, str) or not hosts.strip():
            raise doc.error("every play needs 'hosts' (a node, a group, or all)", [i, "hosts"], field="hosts")
        serial = raw.get("serial")
        if serial is not None and (isinstance(serial, bool) or not isinstance(serial, int) or serial < 1):
            raise doc.error("serial is a whole number of hosts at a time, 1 or more", [i, "serial"], field="serial")
        name = raw.get("name") or hosts
        if not isinstance(name, str):
            raise doc.error("must be a string", [i, "name"], field="name")
        variables = raw.get("vars") or {}
        if not isinstance(variables, dict):
            raise doc.error("must be a mapping", [i, "vars"], field="vars")
        for key in variables:
            if not isinstance(key, str):
                raise doc.error("variable names are strings", [i, "vars"], field="vars")
        sections = {key: raw.get(key) or [] for key in ("tasks", "handlers", "roles")}
        for key, value in sections.items():
            if not isinstance(value, list):
                raise doc.error("must be a list", [i, key], field=key)
        handlers = [_task(doc, yamlfile.plain(t), [i, "handlers", j]) for j, t in enumerate(sections["handlers"])]
        _handlers_unique(doc, handlers, i)
        plays.append(
            Play(
                name=name,
                hosts=hosts.strip(),
                origin=doc.origin([i]),
                vars=Layer.from_yaml(yamlfile.plain(variables), str(path), data, [i, "vars"]),
                roles=tuple(
                    _role_ref(doc, yamlfile.plain(r), [i, "roles", j]) for j, r in enumerate(sections["roles"])
                ),
                tasks=tuple(_task(doc, yamlfile.plain(t), [i, "tasks", j]) for j, t in enumerate(sections["tasks"])),
                handlers=tuple(handlers),
                serial=serial,
            )
        )
    return Playbook(path=path, plays=tuple(plays))
