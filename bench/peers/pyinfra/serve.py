"""The converged checks of ``gpuhost launch sglang`` and ``verify serve`` as a pyinfra deploy (bench/commands.py):
the container running, its SGLang unit active, ``/health`` 200 from inside it (a fact each; a failed check raises)."""

import os
import shlex

from pyinfra import host
from pyinfra.facts.server import Command

CTID = int(os.environ.get("BENCH_CTID", "230"))
HEALTH = os.environ.get("BENCH_HEALTH", "http://127.0.0.1:30000/health")
ASK = "import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=10).status)"


def read(command: str) -> str:
    return (host.get_fact(Command, command=command) or "").strip()


if read(f"pct status {CTID}") != "status: running":
    raise SystemExit(f"CT {CTID} is not running")
if read(f"pct exec {CTID} -- systemctl is-active gpuhost-sglang.service") != "active":
    raise SystemExit("gpuhost-sglang.service is not active")
if read(f"pct exec {CTID} -- python3 -c {shlex.quote(ASK)} {HEALTH}") != "200":
    raise SystemExit("/health did not answer 200")
