"""pvesh: the API from the shell, as root@pam (``pvesh get|set|create|delete PATH [-k v]...``)."""

from __future__ import annotations

import json
import sys

from gpuhost.lab.node import api, tasks
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
    if isinstance(data, str) and data.startswith("UPID:"):
        _sync_task(data)
    _print(data, fmt)
    return 0


def _sync_task(upid: str) -> None:
    """In the CLI a task runs synchronously (pve-common RESTEnvironment.pm:529 ``$sync`` for ``type eq
    'cli'``): its log is tee'd to stdout while it runs (442-487), then its end goes to stderr —
    ``TASK ERROR: X`` as ``X``, ``TASK WARNINGS: N`` as "Task finished with N warning(s)!" (489-498) —
    and pvesh prints the UPID and exits 0 either way (pve-manager PVE/CLI/pvesh.pm:443-460)."""
    log = tasks.lines(upid)
    for line in log:
        if not line.startswith(("TASK OK", "TASK ERROR: ", "TASK WARNINGS: ")):
            print(line)
    sys.stdout.flush()
    end = log[-1] if log else ""
    if end.startswith("TASK ERROR: "):
        print(end.removeprefix("TASK ERROR: "), file=sys.stderr)
    elif end.startswith("TASK WARNINGS: "):
        print(f"Task finished with {end.removeprefix('TASK WARNINGS: ')} warning(s)!", file=sys.stderr)
    sys.stderr.flush()


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
