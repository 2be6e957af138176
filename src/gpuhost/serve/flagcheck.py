"""A profile's flags against the real argparse table of its SGLang version."""

from __future__ import annotations

import json
from typing import Any

from gpuhost.checks import Finding, Level, check
from gpuhost.serve.argtypes import type_error
from gpuhost.serve.flagtable import (
    FlagArg,
    FlagTable,
    Match,
    available_versions,
    history,
    load_table,
    removed_in,
    resolve,
    version_key,
)
from gpuhost.serve.profile import FlagValue, Profile

CHECK = "serve.flags"


def _first_deprecated(flag: str, version: str) -> str | None:
    first: str | None = None
    for v, arg in history(flag):
        if version_key(v) > version_key(version):
            break
        if arg is not None and arg.deprecated:
            first = first or v
        elif arg is not None:
            first = None
    return first


#: ``sglang serve`` takes the backend selector out of argv before ServerArgs parses the rest (sglang 0.5.23
#: ``cli/serve.py:30-58``, ``_extract_model_type_override``; exact spelling only, no abbreviation; its values are
#: checked by the backend registry, which installed entry points extend, so any non-empty value passes here)
SERVE_FRONT_END_FLAG = "--model-type"


def _serve_front_end(profile: Profile) -> bool:
    entry = profile.entrypoint
    return len(entry) >= 2 and entry[-1] == "serve" and entry[-2].rsplit("/", 1)[-1] == "sglang"


def _type_error(arg: FlagArg, value: Any) -> str | None:
    if isinstance(value, bool):
        return f"needs a {arg.type or 'value'}, got a switch ({value})"
    text = str(value)
    try:
        if arg.type == "int":
            int(text)
        elif arg.type == "float":
            float(text)
        elif arg.type == "json" or (arg.type == "str" and arg.dest.endswith("json_model_override_args")):
            json.loads(text)
    except ValueError:
        return f"invalid {arg.type} value: '{text}'"
    return type_error(arg.type, text)


def _values(value: FlagValue) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def check_value(arg: FlagArg, flag: str, value: FlagValue) -> str | None:
    """Why ``value`` is not accepted for ``arg`` (``None`` when it is)."""
    if not arg.takes_value:
        if isinstance(value, bool):
            return None
        return f"{flag} is a switch (action {arg.action}); write 'true' (or drop it), not '{value}'"
    if isinstance(value, bool):
        return f"{flag} needs a value"
    values = _values(value)
    if len(values) > 1 and arg.nargs in (None, "?") and arg.action != "append":
        return f"{flag} takes one value, got {len(values)}"
    for v in values:
        err = _type_error(arg, v)
        if err:
            return f"{flag}: {err}"
        if arg.choices is not None and str(v) not in {str(c) for c in arg.choices}:
            shown = ", ".join(str(c) for c in arg.choices)
            return f"{flag}: invalid choice: '{v}' (choose from {shown})"
    return None


def _finding(level: Level, subject: str, message: str, cause: str | None, fix: str | None) -> Finding:
    return Finding(level=level, check=CHECK, subject=subject, message=message, cause=cause, fix=fix)


@check(
    CHECK,
    title="SGLang flags exist and take these values",
    group="serve",
    meaning="A flag is unknown, an ambiguous abbreviation, removed, or given a value its version refuses: "
    "SGLang would exit with status 2 before loading anything.",
    fix="Use the spelling and values of the flag table of the pinned SGLang version.",
)
def check_flags(profile: Profile, table: FlagTable | None = None) -> list[Finding]:
    """Every flag of ``profile`` against the table of ``profile.pins.sglang``."""
    version = profile.pins.sglang
    subject = f"profile {profile.name}"
    if table is None:
        if version not in available_versions():
            return [
                _finding(
                    Level.FAIL,
                    subject,
                    f"no flag table for SGLang {version}",
                    "the flags cannot be checked against the real parser",
                    f"run scripts/extract_sglang_flags.py {version} and commit the table",
                )
            ]
        table = load_table(version)
    out: list[Finding] = []
    for flag, value in profile.flags.items():
        name = flag.split("=", 1)[0]
        if name == SERVE_FRONT_END_FLAG and _serve_front_end(profile):
            if isinstance(value, bool) or not str(value):
                out.append(
                    _finding(
                        Level.FAIL,
                        subject,
                        f"{name} needs a value (the serving backend: auto, or an installed one)",
                        "sglang serve raises 'Error: --model-type requires a value.'",
                        "write --model-type: auto, or drop it",
                    )
                )
            continue
        res = resolve(table, name)
        if res.match is Match.UNKNOWN:
            gone = removed_in(name, version)
            if gone:
                msg = f"{name}: removed (last in {gone[0]}, absent from {gone[1]} on)"
                out.append(
                    _finding(
                        Level.FAIL,
                        subject,
                        msg,
                        f"SGLang {version} answers 'unrecognized arguments: {name}'",
                        "drop it or use its replacement (see the flag's help in the older table)",
                    )
                )
            else:
                out.append(
                    _finding(
                        Level.FAIL,
                        subject,
                        f"{name}: unknown to SGLang {version}",
                        "argparse exits with 'unrecognized arguments'",
                        "check the spelling",
                    )
                )
            continue
        if res.match is Match.AMBIGUOUS:
            gone = removed_in(name, version)
            was = f"; it was a flag of its own until {gone[0]}" if gone else ""
            out.append(
                _finding(
                    Level.FAIL,
                    subject,
                    f"{name}: ambiguous option, could match {', '.join(res.candidates)}{was}",
                    f"SGLang {version} exits with 'ambiguous option'",
                    "spell the full flag name",
                )
            )
            continue
        assert res.arg is not None
        if res.match is Match.PREFIX:
            out.append(
                _finding(
                    Level.WARN,
                    subject,
                    f"{name}: abbreviation of {res.candidates[0]}",
                    "argparse accepts unique prefixes, but a later flag can make it ambiguous",
                    f"write {res.candidates[0]}",
                )
            )
        if res.arg.deprecated:
            since = _first_deprecated(res.arg.flags[0], version) or version
            out.append(
                _finding(
                    Level.WARN,
                    subject,
                    f"{name}: deprecated (since {since}): {res.arg.help or ''}",
                    "still accepted with a warning; may be removed",
                    "use its replacement",
                )
            )
        err = check_value(res.arg, name, value)
        if err:
            out.append(
                _finding(
                    Level.FAIL, subject, err, f"SGLang {version} exits with status 2", "use a value from the table"
                )
            )
    if not any(f.level >= Level.WARN for f in out):
        out.append(_finding(Level.PASS, subject, f"{len(profile.flags)} flags valid for SGLang {version}", None, None))
    return out
