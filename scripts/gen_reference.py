"""Generate the runbook site's reference and troubleshooting pages from the code.

Nothing here is copied: every page is built from the registries and models the program itself uses —
the typer app (CLI), the inventory's pydantic models, each role's ``Vars``, each operation's ``Args``,
the error hierarchy, the JSON schemas in ``docs/schema/``, and the check registry (host, container,
P2P, bench, serve rules, SGLang log signatures).

Two ways to run it:

* as a MkDocs hook (``hooks: [scripts/gen_reference.py]`` in ``mkdocs.yml``): ``mkdocs build`` adds the
  pages to the site in memory; nothing is written into ``docs/``;
* as a script: ``python scripts/gen_reference.py [--out DIR]`` writes them to ``DIR`` (default
  ``build/reference-pages``) to read or diff.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from pydantic import BaseModel  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402

#: Modules never imported to collect checks: programs shipped to targets that run at import.
SKIP_MODULES = ("gpuhost.tools", "gpuhost.probe")

#: How each check group is introduced on the troubleshooting page (a new group still appears, untitled).
#: what the operator sees → the checks that explain it (the top of the troubleshooting page: by symptom first)
SYMPTOMS: list[tuple[str, list[str]]] = [
    (
        "After the reboot the kernel command line lacks the IOMMU tokens, or passthrough is off",
        ["host.cmdline_booted", "host.cmdline_configured", "host.iommu_passthrough", "host.iommu_groups"],
    ),
    (
        "`nvidia-smi` on the host fails, or says Driver/library version mismatch",
        ["host.nvidia_module", "host.nvidia_api_mismatch", "host.gpu_init", "installer.nvidia"],
    ),
    (
        "The NVIDIA installer stopped with an error",
        ["installer.nvidia"],
    ),
    (
        "The container does not start, or starts without its GPUs",
        ["ct.running", "ct.devices_configured", "ct.device_nodes", "host.nvidia_uvm"],
    ),
    (
        "`nvidia-smi` in the container lists fewer GPUs, or another driver version than the host",
        ["ct.gpus_listed", "ct.driver_match", "ct.driver_held"],
    ),
    (
        "CUDA fails to initialise in the container (`cuInit`, out of memory at once)",
        ["ct.cuda_init", "ct.uvm", "ct.memlock", "sglang.log.nvidia-uvm-missing"],
    ),
    (
        "A GPU VM does not start, or its guest sees no GPU",
        ["vm.running", "vm.vfio_bound", "host.vfio_bound", "vm.q35", "vm.pcie", "vm.functions", "vm.guest_driver"],
    ),
    (
        "GPU to GPU copies are slow, or P2P is reported unavailable",
        ["p2p-status", "p2p-measured", "p2p-vs-staged", "link-width", "link-gen", "vm.cliques", "host.iommu_faults"],
    ),
    (
        "NCCL hangs or times out (all-reduce, multi-node start)",
        ["nccl", "sglang.log.nccl-timeout", "sglang.log.dist-init-timeout", "sglang.log.nccl-error", "serve.nccl-env"],
    ),
    (
        "SGLang exits at start-up (arguments, model type, kernels)",
        [
            "sglang.log.bad-arguments",
            "sglang.log.transformers-model-type",
            "sglang.log.arch-unsupported-kernel",
            "sglang.log.no-kernel-image",
            "sglang.log.flashinfer-jit-build-failed",
            "serve.flags",
        ],
    ),
    (
        "SGLang runs out of GPU memory, or hangs in CUDA graph capture",
        ["sglang.log.cuda-oom", "sglang.log.kv-pool-too-small", "sglang.log.graph-capture-failed"],
    ),
    (
        "The server answers `/health` but its answers are wrong, NaN, or it dies on the first query",
        ["serve.smoke", "serve.canary", "serve.logprobs", "sglang.log.nan-in-sampling", "serve.server-info"],
    ),
    (
        "The server never becomes ready, or `/health` does not answer",
        ["serve.unit", "serve.health", "sglang.log.port-in-use", "sglang.log.watchdog-timeout"],
    ),
    (
        "A benchmark level fails, or its figures make no sense",
        [
            "bench.failed-requests",
            "bench.incomplete-result",
            "bench.figures-sane",
            "bench.token-counts",
            "bench.not-compute-bound",
        ],
    ),
]


GROUPS: dict[str, tuple[str, str]] = {
    "host": (
        "Host checks",
        "Emitted by `gpuhost verify host`, by the last task of `provision host` / `provision lxc`, and by the "
        "acceptance suite. They read the host's facts (`/proc/cmdline`, boot loader files, dmesg, modules, "
        "`nvidia-smi`).",
    ),
    "installer": (
        "NVIDIA installer log",
        "Emitted by `gpuhost doctor nvidia-installer` from `/var/log/nvidia-installer.log` (or any saved output "
        "of the `.run` installer).",
    ),
    "container": (
        "Container checks",
        "Emitted by `gpuhost verify lxc` and the last task of `provision lxc`, about each GPU container.",
    ),
    "p2p": (
        "GPU peer-to-peer diagnoses",
        "Emitted by `gpuhost verify p2p` from the probe's evidence (NVML, CUDA copies, optional NCCL). "
        "See [Verify P2P](verify-p2p.md) for the matrices and the heatmap.",
    ),
    "bench": (
        "Benchmark findings",
        "Emitted by `gpuhost bench sglang` from a concurrency sweep and the GPU samples taken meanwhile.",
    ),
    "serve": (
        "SGLang configuration rules",
        "The validator refuses a serving profile before anything is installed when one of these FAILs.",
    ),
    "sglang-log": (
        "SGLang crash and warning signatures",
        "Matched by the log doctor (`gpuhost doctor`) in SGLang's journal while it starts and serves.",
    ),
    "doctor": (
        "Whole-stack doctor",
        "Emitted by `gpuhost doctor -i INV` itself, about what it could or could not read. See "
        "[Doctor](doctor.md) for how it ranks every finding on this page.",
    ),
}

GENERATED_NOTE = (
    "<!-- Generated by scripts/gen_reference.py from the code at build time. Do not edit: "
    "change the code (descriptions, docstrings, registries) instead. -->\n\n"
)


# ---------------------------------------------------------------------------------------------- helpers


def _doc(obj: Any) -> str:
    """An object's own docstring (not inherited), dedented; '' when it has none."""
    raw = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    # Sphinx roles (:mod:`x`, :class:`~a.B`) read as plain code in Markdown
    return re.sub(r":\w+:`~?([^`]+)`", r"`\1`", inspect.cleandoc(raw)) if raw else ""


def _cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: Any) -> str:
    s = str(text).replace("|", "\\|")
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def _type_name(tp: Any) -> str:
    """A readable annotation: ``list[int] | None``, ``Literal['lxc', 'vm']``."""
    if tp is None or tp is type(None):
        return "None"
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]" if args else name
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        try:
            value = field.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
    else:
        value = field.default
    if value is PydanticUndefined:
        return "**required**"
    if isinstance(value, BaseModel):
        return "(defaults below)"
    return _code(json.dumps(value, default=str))


def _nested_models(tp: Any) -> list[type[BaseModel]]:
    """Pydantic models inside an annotation (``dict[int, ContainerSpec] | None`` → ContainerSpec)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    found: list[type[BaseModel]] = []
    for a in typing.get_args(tp):
        found += _nested_models(a)
    return found


def fields_table(model: type[BaseModel], link_models: bool = True) -> str:
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        key = field.alias or name
        tname = _type_name(field.annotation)
        if link_models:
            for m in _nested_models(field.annotation):
                tname = tname.replace(m.__name__, f"[{m.__name__}](#{m.__name__.lower()})", 1)
        desc = field.description or ""
        constraints = [f"{type(m).__name__.lower()} {_constraint(m)}" for m in field.metadata if _constraint(m)]
        if constraints:
            desc += (" " if desc else "") + "(" + ", ".join(constraints) + ")"
        rows.append(f"| `{key}` | {tname} | {_default(field)} | {_cell(desc)} |")
    return "\n".join(rows) + "\n"


def _constraint(meta: Any) -> str:
    for attr in ("ge", "gt", "le", "lt", "pattern", "min_length", "max_length"):
        if getattr(meta, attr, None) is not None:
            return str(getattr(meta, attr))
    return ""


def undescribed() -> list[str]:
    """Every model field and operation without a description: the docs would have a hole there."""
    missing: list[str] = []
    for model in inventory_models():
        for name, f in model.model_fields.items():
            if not f.description:
                missing.append(f"inventory {model.__name__}.{name}")
    from gpuhost.roles.table import ROLES

    for rname, role in ROLES.items():
        if not _doc(role):
            missing.append(f"role {rname} (class docstring)")
        for name, f in role.Vars.model_fields.items():
            if not f.description:
                missing.append(f"role {rname} var {name}")
    from gpuhost.operations.table import OPERATIONS

    for kind, op in OPERATIONS.items():
        if not _doc(op):
            missing.append(f"operation {kind} (class docstring)")
        for name, f in op.Args.model_fields.items():
            if not f.description:
                missing.append(f"operation {kind} arg {name}")
    return missing


# ---------------------------------------------------------------------------------------------- CLI


def page_cli() -> str:
    import typer
    from typer import _click as tclick  # typer >= 0.20 carries its own click

    from gpuhost.cli.app import _register, app

    _register()
    root = typer.main.get_command(app)
    out = [
        "# Command line\n",
        GENERATED_NOTE,
        "Every command, its arguments and options, as `gpuhost … --help` prints them "
        "(read from the typer app). Exit codes: see [Exit codes and errors](errors.md).\n",
    ]

    def walk(cmd: Any, ctx: Any, depth: int) -> None:
        out.append(f"{'#' * min(depth + 2, 6)} `{ctx.command_path}`\n")
        if cmd.help:
            out.append(inspect.cleandoc(cmd.help).split("\f")[0] + "\n")
        out.append(f"```text\n{cmd.get_usage(ctx).strip()}\n```\n")
        records = [r for p in cmd.params if not getattr(p, "hidden", False) if (r := p.get_help_record(ctx))]
        if records:
            out.append("| argument / option | help |\n|---|---|")
            for names, helptext in records:
                out.append(f"| {_code(names)} | {_cell(helptext)} |")
            out.append("")
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is None or sub.hidden:
                    continue
                walk(sub, tclick.core.Context(sub, info_name=name, parent=ctx), depth + 1)

    walk(root, tclick.core.Context(root, info_name="gpuhost"), 0)
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- inventory


def inventory_models() -> list[type[BaseModel]]:
    """The inventory document's models, from the top (``InventoryFile``) down, then any other model the
    module defines (a model added there appears without touching this script)."""
    from gpuhost.inventory import models

    order: list[type[BaseModel]] = []

    def visit(m: type[BaseModel]) -> None:
        if m in order:
            return
        order.append(m)
        for f in m.model_fields.values():
            for sub in _nested_models(f.annotation):
                if sub.__module__ == models.__name__:
                    visit(sub)

    visit(models.InventoryFile)
    for _, obj in inspect.getmembers(models, inspect.isclass):
        if issubclass(obj, BaseModel) and obj.__module__ == models.__name__ and not obj.__name__.startswith("_"):
            visit(obj)
    return order


def page_inventory() -> str:
    out = [
        "# Inventory fields\n",
        GENERATED_NOTE,
        "The inventory file (`-i inventory.yml`), model by model, from `gpuhost.inventory.models`. Unknown keys "
        "are errors that name file, line and field; secrets are never written inline (use the `*_env` or "
        "`*_file` fields).\n",
    ]
    for m in inventory_models():
        out.append(f"## {m.__name__}\n")
        if _doc(m):
            out.append(_doc(m) + "\n")
        out.append(fields_table(m))
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- roles


def page_roles() -> str:
    from gpuhost.inventory import models
    from gpuhost.roles.table import ROLES

    out = [
        "# Role variables\n",
        GENERATED_NOTE,
        "Each role's variables, from its `Vars` model. Set them in the inventory (`vars:` of the file, a group "
        "or a node), in a play's `vars:`, or with `-e KEY=VALUE`. Keys a role does not know pass through to the "
        "other roles and the templates.\n",
    ]
    for name in sorted(ROLES):
        role = ROLES[name]
        out.append(f"## `{name}`\n")
        if _doc(role):
            out.append(_doc(role) + "\n")
        out.append(f"Class `{role.__module__}.{role.__name__}`; variables `{role.Vars.__name__}`.\n")
        if role.templates:
            out.append("Templates: " + ", ".join(f"`{t}`" for t in role.templates) + "\n")
        table = fields_table(role.Vars, link_models=False)
        for m in {m for f in role.Vars.model_fields.values() for m in _nested_models(f.annotation)}:
            if m.__module__ == models.__name__:
                table = table.replace(m.__name__, f"[{m.__name__}](inventory.md#{m.__name__.lower()})", 1)
        out.append(table)
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- operations


def page_operations() -> str:
    from gpuhost.operations.table import OPERATIONS

    out = [
        "# Operations\n",
        GENERATED_NOTE,
        "Every operation a playbook task can name (`- name: …` then `KIND: {args}`), from the operation table "
        "`gpuhost.operations.table.OPERATIONS`. Arguments are validated before any host is touched; unknown "
        "arguments are errors.\n",
        "| operation | what it does |\n|---|---|",
    ]
    for kind in sorted(OPERATIONS):
        first = _doc(OPERATIONS[kind]).split("\n\n")[0]
        out.append(f"| [`{kind}`](#{kind.replace('_', '-')}) | {_cell(first)} |")
    out.append("")
    for kind in sorted(OPERATIONS):
        op = OPERATIONS[kind]
        out.append(f"## `{kind}` {{#{kind.replace('_', '-')}}}\n")
        out.append(_doc(op) + "\n")
        out.append(f"Class `{op.__module__}.{op.__name__}`.\n")
        if op.Args.model_fields:
            out.append(fields_table(op.Args, link_models=False))
        else:
            out.append("No arguments.\n")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- errors


def page_errors() -> str:
    from gpuhost import errors
    from gpuhost.cli.failures import INTERNAL_ERROR

    base = errors.GpuhostError
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, base)]
    out = [
        "# Exit codes and errors\n",
        GENERATED_NOTE,
        "## Exit codes\n",
        "| exit | meaning |\n|---|---|",
        "| `0` | success: everything ran and every check passed |",
    ]
    by_code: dict[int, list[str]] = {}
    for c in classes:
        by_code.setdefault(c.exit_code, []).append(c.__name__)
    by_code.setdefault(1, [])
    by_code.setdefault(2, [])
    words = {
        1: "something failed: a task, a check, an unreachable host",
        2: "bad input (inventory, playbook, command line, a secret that cannot be read); nothing was changed",
    }
    for code in sorted(by_code):
        names = ", ".join(f"[`{n}`](#{n.lower()})" for n in sorted(by_code[code]))
        meaning = words.get(code, "")
        out.append(f"| `{code}` | {meaning}{'; ' if meaning and names else ''}{names} |")
    out.append(
        f"| `{INTERNAL_ERROR}` | a bug in gpuhost: one line `internal error: …` on stderr; "
        "`gpuhost --debug …` shows the traceback (`gpuhost.cli.failures.INTERNAL_ERROR`) |"
    )
    out.append(
        "| `124` | a command run by gpuhost ran past its timeout ([`CommandTimeout`](#commandtimeout)); "
        "reported inside the message, the CLI exits `1` |"
    )
    out.append("")
    out.append("## The error hierarchy\n")
    out.append(
        "Every error gpuhost raises is a `GpuhostError` from `gpuhost.errors`; the CLI prints `error: MESSAGE` "
        "(secrets masked) and exits with the class's `exit_code`.\n"
    )
    tree: list[str] = []

    def walk(cls: type, depth: int) -> None:
        tree.append(f"{'    ' * depth}{cls.__name__} (exit {cls.exit_code})")  # type: ignore[attr-defined]
        for sub in sorted(cls.__subclasses__(), key=lambda c: c.__name__):
            if sub.__module__ == errors.__name__:
                walk(sub, depth + 1)

    walk(base, 0)
    out.append("```text\n" + "\n".join(tree) + "\n```\n")
    for c in classes:
        parent = c.__mro__[1].__name__
        out.append(f"### {c.__name__}\n")
        out.append(f"Subclass of `{parent}`; exit `{c.exit_code}`.\n")
        if _doc(c):
            out.append(_doc(c) + "\n")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- schemas


def schema_files() -> list[Path]:
    return sorted((ROOT / "docs" / "schema").glob("*.schema.json"))


def page_schemas() -> str:
    out = [
        "# JSON output schemas\n",
        GENERATED_NOTE,
        "The `--json` outputs are one JSON object each, described by a JSON Schema (draft 2020-12) in "
        "`docs/schema/`. Fields are only added, never renamed or removed, within one `schema` version.\n",
    ]
    for path in schema_files():
        doc = json.loads(path.read_text())
        out.append(f"## {doc.get('title', path.name)}\n")
        out.append(
            f"File [`{path.name}`](../schema/{path.name}); `$id` `{doc.get('$id', '')}`.\n",
        )
        if doc.get("description"):
            out.append(doc["description"] + "\n")
        props = doc.get("properties", {})
        required = set(doc.get("required", []))
        if props:
            out.append("| key | type | required | description |\n|---|---|---|---|")
            for key, spec in props.items():
                out.append(
                    f"| `{key}` | {_cell(_schema_type(spec))} | {'yes' if key in required else ''} | "
                    f"{_cell(spec.get('description', ''))} |"
                )
            out.append("")
        body = json.dumps(doc, indent=2)
        out.append('??? note "The whole schema"\n\n    ```json\n' + _indent(body, 4) + "\n    ```\n")
    return "\n".join(out)


def _schema_type(spec: dict[str, Any]) -> str:
    if "const" in spec:
        return f"const {json.dumps(spec['const'])}"
    if "enum" in spec:
        return "one of " + ", ".join(json.dumps(v) for v in spec["enum"])
    if "$ref" in spec:
        return spec["$ref"].rsplit("/", 1)[-1]
    t = spec.get("type", "")
    if isinstance(t, list):
        t = " | ".join(t)
    if t == "array" and isinstance(spec.get("items"), dict):
        return f"array of {_schema_type(spec['items'])}"
    if not t and ("oneOf" in spec or "anyOf" in spec):
        return " | ".join(_schema_type(s) for s in spec.get("oneOf", spec.get("anyOf", [])))
    return str(t)


def _indent(text: str, n: int) -> str:
    return "\n".join((" " * n + line) if line else line for line in text.splitlines())


# ---------------------------------------------------------------------------------------------- checks


def import_all_checks() -> dict[str, Any]:
    """Import every gpuhost module (but programs shipped to targets), so every ``@check`` has registered;
    returns the registry. A module added anywhere in the package is found without touching this script."""
    import gpuhost
    from gpuhost.checks import registered

    for mod in pkgutil.walk_packages(gpuhost.__path__, "gpuhost."):
        if mod.name.endswith("__main__") or mod.name.startswith(SKIP_MODULES):
            continue
        importlib.import_module(mod.name)
    return registered()


def check_functions() -> dict[str, Any]:
    """check name → the function registered under it (the ones decorated with ``@check``)."""
    found: dict[str, Any] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("gpuhost.") or module is None:
            continue
        for obj in vars(module).values():
            cname = getattr(obj, "check_name", None)
            if isinstance(cname, str) and inspect.isfunction(obj) and obj.__module__ == name:
                found.setdefault(cname, obj)
    return found


def anchor(check_name: str) -> str:
    """The troubleshooting page's anchor of a check: ``host.cmdline_booted`` → ``host-cmdline_booted``."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", check_name)


def page_troubleshooting() -> str:
    registry = import_all_checks()
    fns = check_functions()
    from gpuhost.checks.table import CONTAINER_CHECKS, HOST_CHECKS
    from gpuhost.serve.logscan.signatures import SIGNATURES
    from gpuhost.serve.rules import RULES

    host_table = {c.name: c for c in HOST_CHECKS}
    ct_table = {c.name: c for c in CONTAINER_CHECKS}
    sigs = {s.check_name: s for s in SIGNATURES}
    rules = {r.name: r for r in RULES}
    groups: dict[str, list[Any]] = {}
    for info in registry.values():
        groups.setdefault(info.group, []).append(info)
    order = [g for g in GROUPS if g in groups] + sorted(g for g in groups if g not in GROUPS)

    out = [
        "# Troubleshooting by symptom\n",
        GENERATED_NOTE,
        f"Every finding gpuhost can emit — {len(registry)} checks in {len(groups)} groups — with what it means, "
        "how gpuhost detected it, and the fix. A finding names its check (`check` in `--json`, the first column "
        "of the text report): search this page for it.\n",
        '!!! tip "First, the levels"\n    `FAIL` stops the run (exit 1); `WARN` is worth reading but passes; '
        "`INFO` is context; `PASS` is proof. A finding's own `cause` and `fix` (in the report) are specific to "
        "the machine; the text here is the general case.\n",
        "## By symptom\n",
        "What you see, then the checks that tell why, in the order to read them.\n",
        "| what you see | checks |\n|---|---|",
    ]
    for symptom, names in SYMPTOMS:
        missing = [n for n in names if n not in registry]
        if missing:
            raise RuntimeError(f"troubleshooting symptom {symptom!r} names unknown checks {missing}")
        out.append(f"| {_cell(symptom)} | " + ", ".join(f"[`{n}`](#{anchor(n)})" for n in names) + " |")
    out += ["", "Then every check, by group: what it means, how gpuhost detected it, the fix.\n"]
    for g in order:
        title, intro = GROUPS.get(g, (f"Group `{g}`", ""))
        out.append(f"## {title}\n")
        if intro:
            out.append(intro + "\n")
        out.append("| check | symptom |\n|---|---|")
        for info in sorted(groups[g], key=lambda i: i.name):
            out.append(f"| [`{info.name}`](#{anchor(info.name)}) | {_cell(info.title)} |")
        out.append("")
        for info in sorted(groups[g], key=lambda i: i.name):
            out.append(f"### {info.title} {{#{anchor(info.name)}}}\n")
            out.append(f"Check `{info.name}`.\n")
            out.append(f"**What it means.** {info.meaning.strip()}\n")
            out.append("**How gpuhost detected it.** " + _detection(info.name, fns, sigs, rules) + "\n")
            if info.name in host_table:
                out.append(f"**When it runs.** On every node expected to show {host_table[info.name].wanted}.\n")
            elif info.name in ct_table:
                out.append(f"**When it runs.** In every GPU container expected to show {ct_table[info.name].wanted}.\n")
            out.append(f'!!! success "Fix"\n    {" ".join(info.fix.split())}\n')
            out.append(_doctor_line(info.name))
    return "\n".join(out)


def _doctor_line(name: str) -> str:
    """Where `gpuhost doctor` ranks a check and the command it prints for it (docs/doctor.md#ranking)."""
    from gpuhost.doctor.commands import Where, command_for
    from gpuhost.doctor.rank import EXPLAINS, stage_of

    text = f"**In `gpuhost doctor`.** Stage *{stage_of(name)}* of the [ranking](doctor.md#ranking)"
    explains = EXPLAINS.get(name, ())
    if explains:
        text += "; ranked above what it explains: " + ", ".join(f"[`{c}`](#{anchor(c)})" for c in explains)
    guest = name.startswith(("ct.", "serve.", "sglang.", "bench."))
    where = Where("INV", "NODE", ctid=200 if guest else None, vmid=300 if name.startswith("vm.") else None)
    if name == "serve.admission-queueing":
        where = Where("INV", "NODE", ctid=200, levels="64,256")  # the seeds' bound and the load it met
    command = command_for(name, where)
    if command is not None:
        text += f"; its fix command: `{command}`"
    return text + ".\n"


def _detection(name: str, fns: dict[str, Any], sigs: dict[str, Any], rules: dict[str, Any]) -> str:
    if name in sigs:
        s = sigs[name]
        pats = "\n".join(f"    - `{_code_inline(p.pattern)}`" for p in s.patterns)
        text = (
            f"A line of SGLang's log matches one of these patterns (level {s.level.name}"
            f"{'; the server is down' if s.fatal else ''}):\n\n{pats}\n"
        )
        if s.near is not None:
            text += f"\n    only when `{_code_inline(s.near.pattern)}` matched within the {s.window} lines before.\n"
        if s.source:
            text += f"\nSources: {s.source}.\n"
        text += _variants(s.name)
        return "\n" + _dedent4(text)
    parts = []
    fn = fns.get(name)
    if fn is not None:
        reads = ", ".join(
            f"`{p.annotation}`" if isinstance(p.annotation, str) else f"`{getattr(p.annotation, '__name__', p)}`"
            for p in inspect.signature(fn).parameters.values()
            if p.annotation is not inspect.Parameter.empty
        )
        parts.append(f"`{fn.__module__}.{fn.__name__}`" + (f" judges {reads}." if reads else "."))
        d = _doc(fn)
        if d:
            parts.append("— " + " ".join(d.split("\n\n")[0].split()))
    if name in rules:
        parts.append(f"Validator rule; source: {rules[name].source}.")
    return " ".join(parts) if parts else "(registered without a function)"


def _variants(signature: str) -> str:
    """The cause and fix the log doctor gives instead when the matched line embeds a known error."""
    from gpuhost.serve.logscan.dispatch import VARIANTS

    rows = [v for v in VARIANTS if v.signature == signature]
    if not rows:
        return ""
    out = ["\nWhen the matched line says (first that fits):\n"]
    for v in rows:
        when = f"`{_code_inline(v.when.pattern)}`"
        if v.context is not None:
            when += " and the log shows GLM-5, FP4 or SM120"
        level = f" (level {v.level.name})" if v.level is not None else ""
        src = f" Source: {v.source}." if v.source else ""
        out.append(f"- {when}{level}: {v.cause}. Fix: {v.fix}.{src}")
    return "\n".join(out) + "\n"


def _code_inline(s: str) -> str:
    return s.replace("`", "\\`")


def _dedent4(text: str) -> str:
    return "\n".join(line[4:] if line.startswith("    ") else line for line in text.splitlines())


# ---------------------------------------------------------------------------------------------- all pages


def pages() -> dict[str, str]:
    """Site path → Markdown of every generated page."""
    return {
        "reference/cli.md": page_cli(),
        "reference/inventory.md": page_inventory(),
        "reference/roles.md": page_roles(),
        "reference/operations.md": page_operations(),
        "reference/errors.md": page_errors(),
        "reference/schemas.md": page_schemas(),
        "troubleshooting.md": page_troubleshooting(),
        "fidelity.md": page_fidelity(),
    }


def page_fidelity() -> str:
    """What the lab reproduces, with each behaviour's real source (``gpuhost.lab.fidelity``)."""
    from gpuhost.lab.fidelity import render

    return render()


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages to the site (in memory)."""
    from mkdocs.structure.files import File

    for path, text in pages().items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(f"docs/{path} exists but is generated: delete it (scripts/gen_reference.py)")
        files.append(File.generated(config, path, content=text))
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "reference-pages")
    ap.add_argument("--check-descriptions", action="store_true", help="exit 1 if a field or operation lacks one")
    a = ap.parse_args(argv)
    if a.check_descriptions:
        missing = undescribed()
        for m in missing:
            print(f"no description: {m}")
        return 1 if missing else 0
    for path, text in pages().items():
        dest = a.out / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
        print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
