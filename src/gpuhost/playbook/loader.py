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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuhost import yamlfile
from gpuhost.errors import PlaybookError
from gpuhost.operations import registry
from gpuhost.playbook.models import Play, Playbook, RoleRef
from gpuhost.playbook.task import FLUSH_HANDLERS, Task, validation_message
from gpuhost.roles import get_role, role_names

_PLAY_KEYS = {"name", "hosts", "vars", "roles", "tasks", "handlers"}
_TASK_KEYS = {"name", "tags", "notify"}


def _str_list(value: Any, what: str, err: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise err(f"{what} must be a string or a list of strings")


def _task(raw: Any, path: Path, data: Any, loc: list[str | int]) -> Task:
    def err(msg: str, field: str | None = None, at: list[str | int] | None = None) -> PlaybookError:
        return PlaybookError(msg, file=str(path), line=yamlfile.line_of(data, at or loc), field=field)

    if not isinstance(raw, dict):
        raise err("a task must be a mapping")
    if "meta" in raw:
        if raw["meta"] != "flush_handlers" or set(raw) - {"meta", "name"}:
            raise err("the only meta task is '- meta: flush_handlers'", field="meta", at=[*loc, "meta"])
        return FLUSH_HANDLERS
    ops = [k for k in raw if k not in _TASK_KEYS]
    if len(ops) != 1:
        found = ", ".join(ops) if ops else "none"
        raise err(f"a task needs exactly one operation (found: {found}); known operations: "
                  + ", ".join(registry.kinds()))
    kind = ops[0]
    if registry.get(kind) is None:
        raise err(f"unknown operation '{kind}'; known: {', '.join(registry.kinds())}", field=kind,
                  at=[*loc, kind])
    args = raw[kind]
    if isinstance(args, str) and kind == "command":
        args = {"cmd": args}
    if not isinstance(args, dict):
        raise err(f"arguments of '{kind}' must be a mapping", field=kind, at=[*loc, kind])
    name = raw.get("name") or kind
    task = Task(name=str(name), kind=kind, args=dict(args),
                tags=_str_list(raw.get("tags"), "tags", lambda m: err(m, "tags")),
                notify=_str_list(raw.get("notify"), "notify", lambda m: err(m, "notify")),
                source=f"{path.name}:{yamlfile.line_of(data, loc)}")
    try:
        task.validate_static()
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in (kind, *first["loc"]))
        raise PlaybookError(validation_message(exc).split(": ", 1)[-1], file=str(path),
                            line=yamlfile.line_of(data, [*loc, kind, *first["loc"]]), field=field) from None
    return task


def _role_ref(raw: Any, err: Any) -> RoleRef:
    if isinstance(raw, str):
        ref = RoleRef(raw)
    elif isinstance(raw, dict) and isinstance(raw.get("role"), str) and set(raw) <= {"role", "vars"}:
        ref = RoleRef(raw["role"], dict(raw.get("vars") or {}))
    else:
        raise err("a role is a name or {role: NAME, vars: {...}}")
    if get_role(ref.name) is None:
        known = ", ".join(role_names()) or "none"
        raise err(f"unknown role '{ref.name}' (known: {known})")
    return ref


def load_playbook(path: str | Path) -> Playbook:
    """Parse and check a playbook; nothing touches a host before this succeeds."""
    path = Path(path)
    data = yamlfile.load(path, PlaybookError)
    if not isinstance(data, list) or not data:
        raise PlaybookError("a playbook is a non-empty list of plays", file=str(path), line=1)
    plays = []
    for i, raw in enumerate(data):
        def err(msg: str, field: str | None = None, at: list[str | int] | None = None,
                _i: int = i) -> PlaybookError:
            return PlaybookError(msg, file=str(path), line=yamlfile.line_of(data, at or [_i]), field=field)

        if not isinstance(raw, dict):
            raise err("a play must be a mapping")
        unknown = set(raw) - _PLAY_KEYS
        if unknown:
            key = sorted(unknown)[0]
            raise err("unknown field", field=key, at=[i, key])
        hosts = raw.get("hosts")
        if not isinstance(hosts, str) or not hosts.strip():
            raise err("every play needs 'hosts' (a node, a group, or all)", field="hosts")
        variables = raw.get("vars") or {}
        if not isinstance(variables, dict):
            raise err("must be a mapping", field="vars", at=[i, "vars"])
        tasks = raw.get("tasks") or []
        handlers = raw.get("handlers") or []
        roles = raw.get("roles") or []
        for key, value in (("tasks", tasks), ("handlers", handlers), ("roles", roles)):
            if not isinstance(value, list):
                raise err("must be a list", field=key, at=[i, key])
        plays.append(Play(
            name=str(raw.get("name") or hosts), hosts=hosts.strip(), vars=yamlfile.plain(variables),
            roles=tuple(_role_ref(r, lambda m, _j=j: err(m, "roles", [i, "roles", _j])) for j, r in enumerate(roles)),
            tasks=tuple(_task(yamlfile.plain(t), path, data, [i, "tasks", j]) for j, t in enumerate(tasks)),
            handlers=tuple(_task(yamlfile.plain(t), path, data, [i, "handlers", j]) for j, t in enumerate(handlers)),
        ))
        names = [h.name for h in plays[-1].handlers]
        for ref in plays[-1].roles:
            role_cls = get_role(ref.name)
            assert role_cls is not None
            names += [h.name for h in role_cls().handlers()]
        for j, t in enumerate(plays[-1].tasks):
            for n in t.notify:
                if n not in names:
                    raise PlaybookError(f"notifies unknown handler '{n}'", file=str(path),
                                        line=yamlfile.line_of(data, [i, "tasks", j, "notify"]), field="notify")
    return Playbook(path=path, plays=tuple(plays))


__all__ = ["ValidationError", "load_playbook"]
