"""journalctl of a lab node or container: a unit's output as the lab's service runtime captured it.

Supported: ``-u UNIT`` (repeatable), ``-o cat`` (message only; other outputs print the same, the lab keeps no
timestamps), ``-n N`` / ``--lines N``, ``--no-pager``, ``-q``. Without ``-u`` nothing is printed (the lab has no
system journal)."""

from __future__ import annotations

import os
import sys

from gpuhost.lab.node import services

_VALUE = {"-u", "--unit", "-o", "--output", "-n", "--lines", "--since", "--until", "-b", "--boot"}


def main(argv: list[str]) -> int:
    units: list[str] = []
    lines: int | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        value: str | None = None
        if "=" in arg and arg.startswith("--"):
            arg, value = arg.split("=", 1)
        elif arg in _VALUE and i + 1 < len(argv):
            value = argv[i + 1]
            i += 1
        if arg in ("-u", "--unit") and value:
            units.append(services.unit_name(value))
        elif arg in ("-n", "--lines") and value:
            lines = None if value == "all" else int(value.lstrip("+"))
        elif arg in ("--since", "--until"):
            print(f"journalctl: {arg} is not supported by the lab's journal", file=sys.stderr)
            return 1
        i += 1
    out: list[str] = []
    for unit in units:
        path = os.path.join(services.LOG_DIR, unit + ".log")
        try:
            with open(path, "rb") as fh:
                out += fh.read().decode("utf-8", "replace").splitlines()
        except OSError:
            continue
    if lines is not None:
        out = out[-lines:] if lines else []
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    elif "-q" not in argv and "--quiet" not in argv:
        print("-- No entries --")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
