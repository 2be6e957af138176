"""How fast the ``gpuhost`` command starts, next to bare Python and Ansible.

    python3 bench/startup.py                 # median of 10 runs each
    python3 bench/startup.py --runs 20 --no-ansible
    python3 bench/startup.py --src OTHER/src # time another checkout (e.g. before a change)

Times, in subprocesses, ``gpuhost --help``, ``gpuhost --version`` (this checkout's ``src`` first on
PYTHONPATH), ``python -c pass`` and ``ansible-playbook --version``, and prints each median with its
ratio to ``python -c pass``. ansible-core is installed on first use into its own virtual environment
under ``~/.cache/gpuhost-bench/ansible`` (``$XDG_CACHE_HOME`` if set); when that fails the others
are still timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuhost-bench"


def ansible_playbook() -> tuple[Path | None, str]:
    """The path of ``ansible-playbook`` in the bench's own venv (installed on first use), or why not."""
    venv = cache_dir() / "ansible"
    exe = venv / "bin" / "ansible-playbook"
    if exe.exists():
        return exe, ""
    print(f"installing ansible-core into {venv} (first use) ...", file=sys.stderr)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "ansible-core"],
            check=True,
            capture_output=True,
            timeout=900,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        tail = detail.decode(errors="replace").strip().splitlines()[-1:] if detail else [str(exc)]
        return None, f"ansible-core could not be installed: {' '.join(tail)}"
    return (exe, "") if exe.exists() else (None, "ansible-core installed, but it has no ansible-playbook")


def median_wall(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Median and minimum wall time of ``cmd`` over ``runs`` runs, after one warm-up run."""
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        times.append(time.perf_counter() - start)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.decode(errors='replace')[-500:]}")
    return statistics.median(times), min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per command (median reported)")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the gpuhost sources to time")
    ap.add_argument("--no-ansible", action="store_true", help="do not time (or install) ansible-playbook")
    args = ap.parse_args(argv)

    env = dict(os.environ)
    env["PYTHONPATH"] = str(args.src.resolve()) + os.pathsep + env.get("PYTHONPATH", "")
    py = sys.executable
    commands: list[tuple[str, list[str]]] = [
        ("python -c pass", [py, "-c", "pass"]),
        ("gpuhost --help", [py, "-m", "gpuhost", "--help"]),
        ("gpuhost --version", [py, "-m", "gpuhost", "--version"]),
    ]
    note = ""
    if not args.no_ansible:
        exe, note = ansible_playbook()
        if exe is not None:
            commands.append(("ansible-playbook --version", [str(exe), "--version"]))

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), median of {args.runs} runs, gpuhost from {args.src}"
    )
    print(f"{'command':<28} {'median':>9} {'min':>9} {'vs python':>10}")
    base = None
    for label, cmd in commands:
        med, low = median_wall(cmd, args.runs, env)
        base = base or med
        print(f"{label:<28} {med * 1000:>7.0f}ms {low * 1000:>7.0f}ms {med / base:>9.1f}x")
    if note:
        print(f"ansible-playbook --version: not timed ({note})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
