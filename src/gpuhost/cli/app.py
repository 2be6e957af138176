"""The ``gpuhost`` entry point: registers the command modules on the root app and handles every error once.

Command modules import only typer and light constants at module level; each command imports
the machinery it needs inside its function, so ``gpuhost --help`` starts fast.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from gpuhost.cli.root import app, state

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["app", "console", "main"]


#: The module that adds each top-level command: a run imports only its own command's module, help imports
#: them all. Every command is listed (``tests/unit/cli/test_command_table.py``); keep it sorted.
COMMAND_MODULES = {
    "bench": "bench",
    "capture": "capture",
    "config": "config_cmd",
    "doc": "doc_cmd",
    "doctor": "doctor",
    "facts": "playbook_commands",
    "inventory": "inventory_cmd",
    "lab": "lab",
    "launch": "launch",
    "provision": "provision",
    "run": "playbook_commands",
    "serve": "serve",
    "shell": "shell",
    "tune": "tune",
    "verify": "verify",
}


def _register(argv: list[str] | None = None) -> None:
    """Import the module of the command named in ``argv`` (every module for help or an unknown word)."""
    import importlib

    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    module = COMMAND_MODULES.get(words[0]) if words else None
    # each command module adds its commands to ``app`` (or a sub-app) on import
    for name in [module] if module is not None else sorted(set(COMMAND_MODULES.values())):
        importlib.import_module(f"gpuhost.cli.{name}")
    _help_pages()


def _help_pages() -> None:
    from gpuhost.cli import help_pages

    help_pages.apply(app)


def _no_plugin_scan() -> None:
    """With every plugin disabled, pydantic's loader answers no plugins, but its module imports importlib.metadata
    (about 15 ms) before it reads the setting: when pydantic imports it, a module with its one function (what
    pydantic.plugin._schema_validator imports from it) giving the same answer is loaded instead."""
    if "pydantic.plugin._loader" not in sys.modules and not any(isinstance(f, _NoPluginLoader) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPluginLoader())


class _NoPluginLoader:
    """A meta-path finder and loader of that one module (duck-typed, as the import system asks)."""

    NAME = "pydantic.plugin._loader"

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        from importlib.machinery import ModuleSpec

        return ModuleSpec(name, self) if name == self.NAME else None  # type: ignore[arg-type]

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.get_plugins = lambda: ()  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every error leaves through :func:`gpuhost.cli.failures.report`."""
    # pydantic looks for plugins in every installed distribution's entry points on the first model it
    # builds (about 15 ms of importlib.metadata); the command line has none to load.
    if os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__") == "__all__":
        _no_plugin_scan()
    _register(argv)
    state.debug = False
    try:
        from gpuhost.cli import config

        config.apply()
        app(args=argv, standalone_mode=True)
    except Exception as exc:  # SystemExit (typer.Exit, usage errors) passes through
        from gpuhost.cli.failures import report

        args = sys.argv[1:] if argv is None else argv
        sys.exit(report(exc, debug=state.debug, as_json="--json" in args))


def console() -> None:
    """The ``gpuhost`` program: :func:`main`, then leave without the interpreter's teardown.

    At exit CPython frees every module and object one by one (after a run, about 50 ms of a converged
    run's half second). Nothing of gpuhost's needs it: the output streams are flushed and the exit
    handlers (``--log``'s file among them) run here, then the process ends with the exit code.
    """
    import atexit

    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away (| head): nothing more can be said
        code = code or 1
    os._exit(code)
