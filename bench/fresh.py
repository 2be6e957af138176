"""Time to a served model on the lab from a fresh node, split by phase: the main job's two first runs, timed.

    python3 bench/fresh.py            # a fresh lab node, provision lxc, launch sglang; the phase table
    python3 bench/fresh.py --json     # {"commands": {...}, "phases": {...}, "tasks": [...]}

Needs root (the lab's namespaces). Starts its own lab node (8 simulated GPUs, systemd-boot, AMD, as
``scripts/main.sh``) on ``127.0.154.1`` in a temporary state directory, runs ``gpuhost provision lxc
--allow-reboot --allow-restart --json`` and ``gpuhost launch sglang --allow-restart --json`` as a user would, and
stops the lab. Each task's ``duration_s`` from the reports goes to a phase by its task name (:func:`phase`); what
the commands took outside their tasks (start-up, connecting, reading facts ahead, the recap) is ``client and
facts``. The lab's own costs (its shims are Python programs on the same cores; the reboot is the lab's) are in
the figures: read them as where the time goes, not as a real host's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from commands import ROOT, gpuhost  # bench/commands.py: a gpuhost command as a user runs it, its report

ADDRESS = "127.0.154.1"

#: phases in the order a fresh node goes through them; the first rule whose words a task's name holds decides
RULES: list[tuple[str, tuple[str, ...]]] = [
    ("reboot", ("reboot",)),
    ("proof", ("serves correctly",)),
    ("start", ("server running", "ready (", "gpuhost-sglang.service", "launch.sh", "sglang.env")),
    ("weights", ("model",)),
    ("venv", ("venv", "install script", "gpuhost's directories", "python, glibc")),
    ("driver in CT", ("NVIDIA installer pushed", "userspace", "held back", "CT 200: verified")),
    ("CT", ("CT ",)),
]


def phase(task: str) -> str:
    for name, words in RULES:
        if any(w in task for w in words):
            return name
    return "host"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    lab_cmd = [sys.executable, "-m", "gpuhost", "lab"]
    commands: dict[str, float] = {}
    tasks: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpuhost-bench-fresh-") as tmp:
        state = Path(tmp) / "lab"
        start = time.perf_counter()
        subprocess.run(
            [*lab_cmd, "up", "--nodes", "1", "--gpus", "8", "--boot", "systemd-boot", "--cpu", "amd"]
            + ["--state-dir", str(state), "--address", ADDRESS],
            env=env,
            check=True,
            capture_output=True,
        )
        commands["lab up (not gpuhost)"] = time.perf_counter() - start
        try:
            inventory = state / "inventory.yml"
            for name, argv_ in (
                ("provision lxc", ("provision", "lxc", "--allow-reboot", "--allow-restart")),
                ("launch sglang", ("launch", "sglang", "--allow-restart")),
            ):
                wall, doc = gpuhost(ROOT / "src", inventory, *argv_)
                commands[name] = wall
                for t in doc["tasks"]:
                    tasks.append({"command": name, "task": t["task"], "status": t["status"], "s": t["duration_s"]})
        finally:
            subprocess.run([*lab_cmd, "down", "--state-dir", str(state)], env=env, check=False, capture_output=True)
    phases: dict[str, float] = defaultdict(float)
    for t in tasks:
        phases[phase(t["task"])] += t["s"]
    in_tasks = sum(phases.values())
    phases["client and facts"] = commands["provision lxc"] + commands["launch sglang"] - in_tasks
    doc = {
        "schema": "gpuhost.bench.fresh/1",
        "cpus": os.cpu_count(),
        "commands": {k: round(v, 2) for k, v in commands.items()},
        "phases": {k: round(v, 2) for k, v in phases.items()},
        "tasks": tasks,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    total = commands["provision lxc"] + commands["launch sglang"]
    print(f"{os.cpu_count()} CPUs; a fresh lab node to a served, proven model: {total:.1f} s of gpuhost")
    for name, secs in commands.items():
        print(f"  {name:<22}{secs:>8.1f} s")
    print("by phase:")
    for name, secs in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<22}{secs:>8.1f} s  {100 * secs / total:>4.0f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
