"""pveversion [-v]."""

from __future__ import annotations

import sys

from gpuhost.lab.node.versions import pveversion_lines


def main(argv: list[str]) -> int:
    verbose = any(a in ("-v", "--verbose") for a in argv)
    print("\n".join(pveversion_lines(verbose)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
