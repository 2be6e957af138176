"""Everything that can be checked before a host is touched, is — here.

For every play and every host it selects: the variables merged from their layers and rendered
(templates compiled, undefined names and secrets caught), every role's typed ``Vars`` validated,
every play task's arguments validated into an operation, every template a task or role renders
compiled and its variables checked, handler names unique and known, the node's secrets read.
A problem raises a :class:`~gpuhost.errors.ConfigError` (exit 2) naming the file, line and field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuhost.core.task import FLUSH_HANDLERS, Task
from gpuhost.errors import ConfigError, GpuhostError, InventoryError, PlaybookError, SecretError, TemplateError
from gpuhost.inventory.loader import Inventory, serving_vars
from gpuhost.playbook.loader import build_operation
from gpuhost.playbook.models import Play, Playbook, RoleRef, TaskSpec
from gpuhost.playbook.variables import Layer, MergedVars, Origin, merge, validate_role_vars
from gpuhost.roles.base import Role, RoleVars
from gpuhost.roles.table import get_role
from gpuhost.runner.connect import API_ONLY, secret_fields
from gpuhost.templating import Templates

#: Names every template may use besides the variables.
RUNTIME_NAMES = frozenset({"inventory_hostname", "node"})


@dataclass
class RoleRun:
    role: Role[Any]
    vars: RoleVars
    handlers: list[Task]


@dataclass
class HostPlay:
    """One play for one host, ready to run: nothing left to validate."""

    vars: dict[str, Any]
    roles: list[RoleRun] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    handlers: list[Task] = field(default_factory=list)


@dataclass
class PreparedPlay:
    play: Play
    hosts: dict[str, HostPlay]


def _err(exc: GpuhostError, origin: Origin, sub: list[str | int] | None = None, fld: str | None = None) -> ConfigError:
    return PlaybookError(str(exc), file=origin.file, line=origin.line(sub or []), field=fld)


def _render_vars(merged: MergedVars, templates: Templates, host: str, node: dict[str, Any]) -> dict[str, Any]:
    """Render every templated value (in precedence order of its key), each error at its origin."""
    base = {**merged.values, "inventory_hostname": host, "node": node}
    out = dict(merged.values)
    for key, value in merged.values.items():
        try:
            out[key] = templates.render_value(value, base)
        except GpuhostError as exc:
            origin = merged.where(key) or Origin("vars")
            raise ConfigError(str(exc), file=origin.file, line=origin.line(), field=key) from None
    return out


def _build_task(spec: TaskSpec, variables: dict[str, Any], templates: Templates) -> Task:
    if spec.is_flush:
        return FLUSH_HANDLERS
    try:
        args = templates.render_value(spec.args, variables)
    except GpuhostError as exc:
        raise _err(exc, spec.origin, fld=spec.kind) from None
    op = build_operation(spec, args)
    src = getattr(op.args, "src", None)
    if spec.kind == "template" and isinstance(src, str):
        try:
            templates.check_file(src, set(variables) | RUNTIME_NAMES | set(getattr(op.args, "vars", {})))
        except TemplateError as exc:
            raise _err(exc, spec.origin, ["src"], "template.src") from None
    line = spec.origin.line()
    return Task(
        name=spec.name,
        kind=spec.kind,
        operation=op,
        tags=spec.tags,
        notify=spec.notify,
        source=f"{spec.origin.file}:{line}" if line else spec.origin.file,
    )


def _layers(play: Play, inventory: Inventory, host: str, extra: Layer) -> list[Layer]:
    doc, path = inventory.document, str(inventory.path)
    layers = [Layer.from_yaml(values, path, doc, loc) for values, loc in inventory.var_sources(host)]
    spec = inventory.nodes[host]
    # the node's guests reach the roles as the inventory validated them (typed, not rendered nor validated again)
    if spec.containers:
        containers = dict(spec.containers)
        layers.append(
            Layer({"containers": containers}, {"containers": Origin(path, doc, ("nodes", host, "containers"))})
        )
    if spec.vms:
        layers.append(Layer({"vms": dict(spec.vms)}, {"vms": Origin(path, doc, ("nodes", host, "vms"))}))
    if inventory.serving.groups:
        # the variable's keys are the group names: its origin is serving.groups, so a path into it is the document's
        origin = Origin(path, doc, ("serving", "groups"))
        layers.append(Layer({"serving": serving_vars(inventory)}, {"serving": origin}))
    layers += [ref.vars for ref in play.roles]
    return [*layers, play.vars, extra]


def _check_handlers(play: Play, handlers: list[Task]) -> None:
    names: dict[str, str] = {}
    for h in handlers:
        if h.name in names:
            raise PlaybookError(
                f"handler '{h.name}' is defined twice ({names[h.name]} and {h.role or 'the play'})",
                file=play.origin.file,
                line=play.origin.line(["handlers"]),
                field="handlers",
            )
        names[h.name] = h.role or "the play"
    for spec in play.tasks:
        for n in spec.notify:
            if n not in names:
                raise PlaybookError(
                    f"notifies unknown handler '{n}' (known: {', '.join(names) or 'none'})",
                    file=spec.origin.file,
                    line=spec.origin.line([]),
                    field="notify",
                )


def _prepare_host(play: Play, inventory: Inventory, host: str, extra: Layer, templates: Templates) -> HostPlay:
    merged = merge(_layers(play, inventory, host, extra))
    node = inventory.nodes[host].model_dump()
    variables = _render_vars(merged, templates, host, node)
    # roles also learn which node their variables are for (it is not a variable anyone sets)
    rendered = MergedVars({**variables, "inventory_hostname": host}, merged.origins)
    hp = HostPlay(vars=variables)
    # a variable no file sets belongs in the inventory, not in the playbook that uses the role
    missing_at = Origin(str(inventory.path), inventory.document, ("nodes", host))
    for ref in play.roles:
        hp.roles.append(_role_run(ref, rendered, templates, missing_at))
    template_vars = {**variables, "inventory_hostname": host, "node": node}
    hp.tasks = [_build_task(spec, template_vars, templates) for spec in play.tasks]
    hp.handlers = [_build_task(spec, template_vars, templates) for spec in play.handlers]
    _check_handlers(play, [*hp.handlers, *(h for r in hp.roles for h in r.handlers)])
    return hp


def _role_run(ref: RoleRef, merged: MergedVars, templates: Templates, missing_at: Origin) -> RoleRun:
    role_cls = get_role(ref.name)
    assert role_cls is not None  # the loader checked it
    typed = validate_role_vars(role_cls.Vars, merged, role=ref.name, fallback=missing_at)
    role = role_cls()
    for name in role_cls.templates:
        try:
            templates.check_file(name, set(merged.values) | RUNTIME_NAMES | role_cls.template_vars)
        except TemplateError as exc:
            raise ConfigError(f"role {ref.name}: {exc}") from None
    return RoleRun(role, typed, [h.in_role(ref.name) for h in role.handlers(typed)])


def read_secrets(inventory: Inventory, host: str) -> None:
    """Every secret the node names is read now; a problem names the inventory line of its field."""
    from gpuhost import yamlfile

    for fld, read in secret_fields(inventory.nodes[host]):
        try:
            read()
        except SecretError as exc:
            loc: list[str | int] = ["nodes", host, *fld.split(".")]
            raise InventoryError(
                exc.message,
                file=str(inventory.path),
                line=yamlfile.line_of(inventory.document, loc),
                field=f"nodes.{host}.{fld}",
            ) from None


def play_host_names(play: Play, inventory: Inventory, allowed: set[str] | None) -> list[str]:
    """The hosts ``play`` runs on: its ``hosts:`` pattern, narrowed to ``allowed`` (``--limit``); a pattern that
    matches nothing known names the play's line."""
    try:
        selected = inventory.select(play.hosts)
    except InventoryError as exc:
        raise PlaybookError(
            exc.message.split(": ", 1)[-1], file=play.origin.file, line=play.origin.line(["hosts"]), field="hosts"
        ) from None
    return [h for h in selected if allowed is None or h in allowed]


def prepare(
    playbook: Playbook, inventory: Inventory, *, limit: str | None, extra: Layer, templates: Templates
) -> list[PreparedPlay]:
    """Check the whole run against the inventory; raises a ConfigError (exit 2) before any host is contacted."""
    allowed = set(inventory.select(limit)) if limit is not None else None
    prepared: list[PreparedPlay] = []
    secrets_read: set[str] = set()
    for play in playbook.plays:
        hosts = play_host_names(play, inventory, allowed)
        for h in hosts:
            if inventory.nodes[h].connection == "api":
                from gpuhost import yamlfile

                raise InventoryError(
                    API_ONLY,
                    file=str(inventory.path),
                    field=f"nodes.{h}.connection",
                    line=yamlfile.line_of(inventory.document, ["nodes", h, "connection"]),
                )
            if h not in secrets_read:
                read_secrets(inventory, h)
                secrets_read.add(h)
        prepared.append(PreparedPlay(play, {h: _prepare_host(play, inventory, h, extra, templates) for h in hosts}))
    return prepared
