"""PVE-style command-line options: ``--key value``, ``-key value``, ``--key=value``, boolean flags."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuhost.lab.node.errors import PveError

_BOOL_WORDS = {"0", "1", "true", "false", "yes", "no", "on", "off"}


class UsageError(PveError):
    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message, exit_code=255, http_status=400)
        self.usage = usage

    def cli_text(self) -> str:
        return f"{self.message}\n{self.usage}\n"


@dataclass
class Parsed:
    positional: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    rest: list[str] = field(default_factory=list)  # after "--"


def parse(
    argv: list[str],
    flags: set[str] | frozenset[str] = frozenset(),
    known: Callable[[str], bool] | None = None,
    usage: str = "",
) -> Parsed:
    out = Parsed()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out.rest = argv[i + 1 :]
            break
        if arg.startswith("-") and len(arg) > 1 and not arg[1:].isdigit():
            key = arg.lstrip("-")
            value: str | None = None
            if "=" in key:
                key, value = key.split("=", 1)
            if known is not None and not known(key) and key not in flags:
                raise UsageError(f"Unknown option: {key}\n400 unable to parse option", usage)
            if value is None:
                if key in flags:
                    if i + 1 < len(argv) and argv[i + 1].lower() in _BOOL_WORDS:
                        value = argv[i + 1]
                        i += 1
                    else:
                        value = "1"
                else:
                    if i + 1 >= len(argv):
                        raise UsageError(f"Option {key} requires an argument\n400 unable to parse option", usage)
                    value = argv[i + 1]
                    i += 1
            out.options[key] = value
        else:
            out.positional.append(arg)
        i += 1
    return out


def run(main: Callable[[], int]) -> int:
    """Run a CLI body: PVE errors are printed the way PVE's CLI prints them."""
    try:
        return main()
    except PveError as exc:
        sys.stdout.flush()
        sys.stderr.write(exc.cli_text())
        return exc.exit_code
    except BrokenPipeError:
        return 141


def is_true(value: str | None) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on")
