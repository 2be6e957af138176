"""``sglang serve``: the console entry point."""

import sys

from .._lab import argtable, server


def main() -> int:
    argv = sys.argv[1:]
    if not argv or argv[0] != "serve":
        sys.stderr.write("usage: sglang {serve} ...\n")
        return 2
    return server.serve(argtable.parse(argv[1:]), argv[1:])
