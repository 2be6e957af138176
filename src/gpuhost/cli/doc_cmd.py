"""``gpuhost doc [OPERATION]``: the operation reference from the command line, as ``ansible-doc`` gives a module's.

Read from the operation table (``gpuhost.operations.table``) and each operation's ``Args`` model, the same source
as the site's Operations page, so the two cannot disagree.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from typing import Any

import typer

from gpuhost.cli.root import app


def _type_name(tp: Any) -> str:
    """A readable annotation: ``list[str] | None``, ``'started' | 'stopped'``."""
    if tp is None or tp is type(None):
        return "null"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]" if args else name
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _default(field: Any) -> str | None:
    """The default as YAML would spell it, or None for a required field."""
    if field.is_required():
        return None
    value = field.default_factory() if field.default_factory is not None else field.default
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return json.dumps(value, default=str)


def _doc(obj: Any) -> str:
    raw = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    return re.sub(r":\w+:`~?([^`]+)`", r"`\1`", inspect.cleandoc(raw)) if raw else ""


def reference(kind: str) -> dict[str, Any]:
    """One operation's reference: what it does, its arguments, a task skeleton."""
    from gpuhost.operations.table import OPERATIONS

    op = OPERATIONS[kind]
    args = []
    for name, field in op.Args.model_fields.items():
        args.append(
            {
                "name": field.alias or name,
                "type": _type_name(field.annotation),
                "required": field.is_required(),
                "default": _default(field),
                "description": " ".join((field.description or "").split()),
            }
        )
    required = [a for a in args if a["required"]]
    skeleton = ["- name: …", f"  {kind}:"] + [f"    {a['name']}: …  # {a['type']}" for a in required]
    if not required:
        skeleton[-1] += " {}"
    return {
        "operation": kind,
        "doc": _doc(op),
        "class": f"{op.__module__}.{op.__name__}",
        "args": args,
        "example": "\n".join(skeleton),
    }


@app.command("doc")
def doc_command(
    operation: str | None = typer.Argument(
        None, metavar="[OPERATION]", help="An operation a playbook task can name (none: list them all)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the reference as one JSON object."),
) -> None:
    """The operation reference: what an operation does, its arguments (type, default, meaning) and a task skeleton;
    without OPERATION, every operation with its first line.

    Exit 0, 2 bad input (an operation that does not exist; the closest names are suggested).

    Examples: gpuhost doc  |  gpuhost doc systemd  |  gpuhost doc template --json
    """
    import difflib

    from gpuhost.cli.config import json_output
    from gpuhost.cli.output import console, print_json
    from gpuhost.errors import UsageError
    from gpuhost.operations.table import KINDS, OPERATIONS

    if operation is None:
        rows = {kind: _doc(OPERATIONS[kind]).split("\n\n")[0] for kind in sorted(KINDS)}
        if json_output(as_json):
            print_json({"operations": rows})
            return
        width = max(map(len, rows))
        for kind, first in rows.items():
            console.print(f"{kind:<{width}}  {' '.join(first.split())}", markup=False, soft_wrap=True)
        return
    if operation not in KINDS:
        close = difflib.get_close_matches(operation, list(KINDS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else " (gpuhost doc lists them)"
        raise UsageError(f"no operation '{operation}'{hint}")
    ref = reference(operation)
    if json_output(as_json):
        print_json(ref)
        return

    def out(text: str = "") -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    out(f"{operation} ({ref['class']})")
    out()
    out(ref["doc"] or "(no description)")
    out()
    out("ARGUMENTS" if ref["args"] else "ARGUMENTS: none")
    for a in ref["args"]:
        when = "required" if a["required"] else f"default: {a['default']}"
        out(f"  {a['name']}  ({a['type']}; {when})")
        if a["description"]:
            out(f"      {a['description']}")
    out()
    out("EXAMPLE")
    for line in ref["example"].splitlines():
        out(f"  {line}")
