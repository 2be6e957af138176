"""The ``gpuhost`` entry point: registers the command modules on the root app and handles every error once.

Command modules import only typer and light constants at module level; each command imports
the machinery it needs inside its function, so ``gpuhost --help`` starts fast.
"""

from __future__ import annotations

import os
import sys

from gpuhost.cli.root import app, state

__all__ = ["app", "console", "main"]


#: The module that adds each top-level command: a run imports only its own command's module.
_COMMAND_MODULES = {
    "bench": "bench",
    "doctor": "doctor",
    "lab": "lab",
    "run": "playbook_commands",
    "facts": "playbook_commands",
    "provision": "provision",
    "verify": "verify",
}


def _register(argv: list[str] | None = None) -> None:
    """Import the module of the command named in ``argv`` (every module for help or an unknown word)."""
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    module = _COMMAND_MODULES.get(words[0]) if words else None
    if module is not None:
        import importlib

        importlib.import_module(f"gpuhost.cli.{module}")
        return
    # Each sub-command module adds its commands to ``app`` (or a sub-app) on import.
    # --- sub-commands (one import per line; keep sorted) ---
    from gpuhost.cli import (
        bench,  # noqa: F401
        doctor,  # noqa: F401
        inventory_cmd,  # noqa: F401
        lab,  # noqa: F401
        launch,  # noqa: F401
        playbook_commands,  # noqa: F401
        provision,  # noqa: F401
        serve,  # noqa: F401
        shell,  # noqa: F401
        verify,  # noqa: F401
    )
    # --- end sub-commands ---


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every error leaves through :func:`gpuhost.cli.failures.report`."""
    # pydantic looks for plugins in every installed distribution's entry points on the first model it
    # builds (about 15 ms of importlib.metadata); the command line has none to load.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _register(argv)
    state.debug = False
    try:
        from gpuhost.cli import config

        config.apply()
        app(args=argv, standalone_mode=True)
    except Exception as exc:  # SystemExit (typer.Exit, usage errors) passes through
        from gpuhost.cli.failures import report

        sys.exit(report(exc, debug=state.debug))


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
