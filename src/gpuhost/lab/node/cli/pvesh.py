"""pvesh: the API from the shell, as root@pam (``pvesh get|set|create|delete PATH [-k v]...``)."""

from __future__ import annotations

import json
import sys

from gpuhost.lab.node import api
from gpuhost.lab.node.cli.args import UsageError, parse, run
from gpuhost.lab.node.errors import PveError

_METHODS = {"get": "GET", "set": "PUT", "create": "POST", "delete": "DELETE", "ls": "GET"}


def main(argv: list[str]) -> int:
    return run(lambda: _main(argv))


def _main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in _METHODS:
        raise UsageError(
            "ERROR: no command specified" if not argv else f"ERROR: unknown command 'pvesh {argv[0]}'",
            "USAGE: pvesh <COMMAND> [ARGS] [OPTIONS]",
        )
    verb, path = argv[0], argv[1]
    p = parse(
        argv[2:],
        flags={"noproxy", "human-readable", "noborder", "noheader"},
        usage=f"pvesh {verb} <api_path> [OPTIONS] [FORMAT_OPTIONS]",
    )
    params = dict(p.options)
    fmt = params.pop("output-format", "text")
    for key in ("noproxy", "human-readable", "noborder", "noheader", "quiet"):
        params.pop(key, None)
    try:
        data = api.handle(_METHODS[verb], path, params, "root@pam")
    except api.NotImplementedRoute:
        raise PveError(f"No '{verb}' handler defined for '{path}'") from None
    except PveError as exc:
        if exc.errors:
            exc.message = exc.message  # "400 Parameter verification failed." + details
        raise
    _print(data, fmt)
    return 0


def _print(data: object, fmt: str) -> None:
    if data is None:
        return
    if fmt == "json":
        print(json.dumps(data, sort_keys=True, separators=(",", ":")))
    elif fmt == "json-pretty":
        print(json.dumps(data, sort_keys=True, indent=4))
    elif isinstance(data, (str, int, float)):
        print(data)
    elif isinstance(data, dict):
        width = max((len(k) for k in data), default=0)
        for key in sorted(data):
            print(f"{key:<{width}} {json.dumps(data[key]) if isinstance(data[key], (dict, list)) else data[key]}")
    else:
        print(json.dumps(data, sort_keys=True, indent=2))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
