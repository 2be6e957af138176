#!/usr/bin/env python3
"""Extract the flag table of SGLang's ``ServerArgs.add_cli_args`` from a released wheel.

Usage::

    scripts/extract_sglang_flags.py VERSION [--wheel PATH] [--out FILE]

Without ``--wheel`` the wheel is fetched with ``pip download --no-deps``. The wheel is unpacked
into a temporary directory and the real argument definitions are *executed* in a child
interpreter: the ``sglang`` and ``sglang.srt`` packages are entered without running their
``__init__`` files, and every module that is not installed (torch, triton, flashinfer, …) is
replaced by an import stub. Only the parser is built; nothing else of SGLang runs.

Output (JSON, one object)::

    {"sglang_version": "0.5.23", "source": "<wheel file name> sha256:<hex>",
     "args": [{"flags": [...], "dest": ..., "action": ..., "type": ..., "choices": ...,
               "nargs": ..., "default": ..., "help": ...}, ...]}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

#: Packages the argument definitions really use (not stubbed): installed beside the unpacked wheel.
REAL_DEPS = ("msgspec", "packaging", "dill")

# ----------------------------------------------------------------------------- child side

#: Modules and attributes that SGLang probes to detect a platform: they must look absent, not stubbed.
ABSENT_MODULES = {
    "torch_npu",
    "habana_frameworks",
    "intel_extension_for_pytorch",
    "torch_musa",
    "torch_mlu",
    "mlx",
    "triton_kernels",
    "torch_xla",
    "torch_tpu",
}
ABSENT_ATTRS = {"npu"}


def _install_stubs() -> None:
    """Make every missing module importable as a permissive stub."""
    import abc
    import importlib.abc
    import importlib.machinery
    import types

    class _Value(str):
        """What a stub returns when called: an empty string that answers everything."""

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _Value()

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return _Value()

        def __getitem__(self, item: Any) -> Any:
            return _Value()

        def __setitem__(self, key: Any, value: Any) -> None:
            return None

        def __int__(self) -> int:
            return 0

        __index__ = __int__

        def __float__(self) -> float:
            return 0.0

        def __lt__(self, other: Any) -> bool:
            return str.__lt__(self, other) if isinstance(other, str) else False

        __le__ = __gt__ = __ge__ = __lt__

        def __hash__(self) -> int:
            return str.__hash__(self)

        def __eq__(self, other: object) -> bool:
            return isinstance(other, str) and str.__eq__(self, other)

    class _Meta(abc.ABCMeta):  # ABCMeta, so a class may derive from a stub and from ABC
        def __getattr__(cls, name: str) -> Any:
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _make(name)

        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            if not cls.__dict__.get("_stub", False):
                return abc.ABCMeta.__call__(cls, *args, **kwargs)
            if len(args) == 1 and not kwargs and callable(args[0]):
                return args[0]  # used as a decorator
            return _Value()

        def register(cls, *args: Any, **kwargs: Any) -> Any:
            if not cls.__dict__.get("_stub", False):
                return abc.ABCMeta.register(cls, *args, **kwargs)
            return _Value()

        def __getitem__(cls, item: Any) -> Any:
            return _make("item")

        def __setitem__(cls, key: Any, value: Any) -> None:
            return None

        def __or__(cls, other: Any) -> Any:
            return _make("union")

        __ror__ = __or__

        def __iter__(cls) -> Any:
            return iter(())

        def __len__(cls) -> int:
            return 0

        def __bool__(cls) -> bool:
            return False

        def __int__(cls) -> int:
            return 0

        __index__ = __int__

        def __float__(cls) -> float:
            return 0.0

        def __lt__(cls, other: Any) -> bool:
            return False

        __le__ = __gt__ = __ge__ = __lt__

        def __contains__(cls, item: Any) -> bool:
            return False

        def __repr__(cls) -> str:
            return f"<stub {cls.__name__}>"

    def _make(name: str) -> Any:
        return _Meta(
            name, (), {"_stub": True, "__module__": "stub", "__init_subclass__": classmethod(lambda cls, **kw: None)}
        )

    class _StubModule(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            if (name.startswith("__") and name.endswith("__")) or name in ABSENT_ATTRS:
                raise AttributeError(name)
            value = _make(name)
            setattr(self, name, value)
            return value

    class _Loader(importlib.abc.Loader):
        def create_module(self, spec: Any) -> Any:
            mod = _StubModule(spec.name)
            mod.__path__ = []
            mod.__version__ = "99.0.0"  # a stubbed dependency is "new enough" for every version gate
            return mod

        def exec_module(self, module: Any) -> None:
            return None

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
            top = fullname.split(".")[0]
            if top in ("sglang", *REAL_DEPS) or top in sys.stdlib_module_names or top in ABSENT_MODULES:
                return None  # SGLang's own modules and the stdlib are real; platform probes must fail
            if top in sys.modules and not isinstance(sys.modules[top], _StubModule):
                return None
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)

    sys.meta_path.insert(0, _Finder())  # stub every third-party module: the same tables in any venv


def _type_name(t: Any) -> str | None:
    if t is None:
        return None
    if t in (int, float, str, bool):
        return t.__name__
    if getattr(t, "__name__", "") == "loads" and getattr(t, "__module__", "") in ("json", "json.decoder"):
        return "json"
    return getattr(t, "__name__", None) or type(t).__name__


_ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_AppendConstAction": "append_const",
    "_CountAction": "count",
    "BooleanOptionalAction": "boolean_optional",
    "_ExtendAction": "extend",
}


def _plain(value: Any) -> Any:
    """A JSON value for a default or a choice (stubs and odd objects become their repr)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, float) and math.isnan(value):
            return None
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=str)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    import enum

    if isinstance(value, enum.Enum):
        return _plain(value.value)
    return repr(value)


def _child(root: str, deps: str | None) -> None:
    import types

    _install_stubs()
    sys.path.insert(0, root)
    if deps:
        sys.path.insert(0, deps)
    for name in ("sglang", "sglang.srt"):
        pkg = types.ModuleType(name)
        pkg.__path__ = [str(Path(root, *name.split(".")))]
        sys.modules[name] = pkg
    import logging

    logging.disable(logging.CRITICAL)
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

    parser = argparse.ArgumentParser(add_help=False)
    ServerArgs.add_cli_args(parser)
    rows = []
    for act in parser._actions:
        if not act.option_strings:
            continue
        help_text = act.help if isinstance(act.help, str) else None
        if help_text == argparse.SUPPRESS:
            help_text = None
        first = help_text.strip().splitlines()[0].strip() if help_text and help_text.strip() else None
        choices = (
            None
            if act.choices is None
            else _plain(act.choices if isinstance(act.choices, (set, frozenset)) else list(act.choices))
        )  # a set is sorted: stable output
        default = "==SUPPRESS==" if act.default == argparse.SUPPRESS else _plain(act.default)
        rows.append(
            {
                "flags": list(act.option_strings),
                "dest": act.dest,
                "action": _ACTIONS.get(type(act).__name__, type(act).__name__),
                "type": _type_name(act.type),
                "choices": choices,
                "nargs": act.nargs if act.nargs is None or isinstance(act.nargs, (int, str)) else str(act.nargs),
                "default": default,
                "help": first,
            }
        )
    json.dump(rows, sys.stdout)


# ----------------------------------------------------------------------------- parent side


def download(version: str, dest: Path) -> Path:
    """``pip download --no-deps sglang==VERSION`` (a CPython 3.11 manylinux or pure wheel)."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--platform",
        "manylinux_2_34_x86_64",
        "--platform",
        "manylinux_2_28_x86_64",
        "--platform",
        "any",
        "-q",
        "-d",
        str(dest),
        f"sglang=={version}",
    ]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"sglang {version} cannot be downloaded (not on PyPI?):\n{proc.stderr.strip()[-2000:]}")
    wheels = sorted(dest.glob(f"sglang-{version}-*.whl"))
    if not wheels:
        raise SystemExit(f"pip left no wheel for sglang {version} in {dest}")
    return wheels[0]


def install_deps(dest: Path) -> Path:
    """``pip install --target`` the few real dependencies once (kept in ``dest``)."""
    if all((dest / name).is_dir() for name in REAL_DEPS):
        return dest
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--target", str(dest), *REAL_DEPS]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"cannot install {', '.join(REAL_DEPS)}:\n{proc.stderr.strip()[-2000:]}")
    return dest


def extract(version: str, wheel: Path, deps: Path | None = None) -> dict[str, Any]:
    """The flag table of ``wheel`` as the committed JSON object."""
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory(prefix="sglang-flags-") as tmp:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp, [n for n in zf.namelist() if n.startswith("sglang/")])
        deps_dir = install_deps((deps or Path(tmp, "_deps")).resolve())
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        proc = subprocess.run(
            [sys.executable, __file__, "--child", tmp, "--deps", str(deps_dir)],
            check=False,
            capture_output=True,
            text=True,
            cwd=tmp,
            timeout=300,
            env=env,
        )
    if proc.returncode != 0:
        raise SystemExit(f"extraction failed for {wheel.name}:\n{proc.stderr.strip()[-4000:]}")
    return {"sglang_version": version, "source": f"{wheel.name} sha256:{digest}", "args": json.loads(proc.stdout)}


def dumps(table: dict[str, Any]) -> str:
    """The committed text: one arg per line, stable."""
    head = {k: v for k, v in table.items() if k != "args"}
    lines = [json.dumps(a, ensure_ascii=False, sort_keys=False) for a in table["args"]]
    body = json.dumps(head, ensure_ascii=False)[:-1]
    return body + ', "args": [\n' + ",\n".join(lines) + "\n]}\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("version", nargs="?")
    ap.add_argument("--wheel", type=Path, help="Use this wheel instead of downloading one.")
    ap.add_argument("--out", type=Path, help="Write here (default: stdout).")
    ap.add_argument("--deps", type=Path, help="Keep the real dependencies (msgspec) in this directory.")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, str(args.deps) if args.deps else None)
        return 0
    if not args.version:
        ap.error("VERSION is required")
    if args.wheel:
        table = extract(args.version, args.wheel, args.deps)
    else:
        with tempfile.TemporaryDirectory(prefix="sglang-wheel-") as tmp:
            table = extract(args.version, download(args.version, Path(tmp)), args.deps)
    text = dumps(table)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
