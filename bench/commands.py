"""The converged operator commands on the lab: wall time and round trips of a re-run that changes nothing.

    flock /tmp/gpuhost-integration.lock python3 bench/commands.py            # 3 rounds after a warm-up
    flock /tmp/gpuhost-integration.lock python3 bench/commands.py --rounds 5 --json
    flock /tmp/gpuhost-integration.lock python3 bench/commands.py --only provision,verify-lxc
    python3 bench/commands.py --src OLD/src --src src   # two trees in turn on the same labs, paired ratios
    python3 bench/commands.py --kept   # also provision lxc and launch sglang with ssh.persist: 60

Needs root (the lab's namespaces) and the lab lock: it starts lab nodes on the tests' addresses. Two labs:

* ``provision``: one node with 8 simulated GPUs (systemd-boot, AMD), the lab inventory's CT 200. The first
  ``gpuhost provision lxc --allow-reboot --allow-restart`` builds it (the host path, a reboot, the container,
  the driver); then each round times a converged ``provision lxc`` and ``verify lxc``.
* ``serve``: the launch tests' node (2 GPUs, the host driver, CT 230 with the driver's userspace and a
  ``serve:`` entry; ``tests/integration/lab/test_launch_sglang.py``). The first ``gpuhost launch sglang``
  installs and starts the SGLang stand-in; then each round times a converged ``launch sglang`` and
  ``verify serve``.

Every command runs as a user runs it (a subprocess, ``--json``); each must exit 0 and (for the playbook
commands) report 0 changes. Round trips are the report's own count: ``hosts.NAME.round_trips`` (remote commands
after connecting, the node's and its guests') for ``provision`` and ``launch``, ``round_trips`` for ``verify``.
Medians over the measured rounds. A busy shared machine: compare figures of the same run only.

The floor of each lab (``bench/commands_floor.py``, once a round): a paramiko script doing the command's checks
over one connection, one remote command each (IOMMU on, the host driver, the container's config and status, the
container's driver equal to the host's; or the container running, its unit active, ``/health`` 200 from inside
it). Each command's figure over its lab's floor is paired per round (the median of the round's ratios).

The peers (once a round, one lab node): ansible-core and pyinfra making the checks they can without a role of their
own (``bench/peers/``): the container's config passing the GPUs, its driver equal to the host's, IOMMU on; or the
container running, its unit active, ``/health`` 200 from inside it. Each command's figure is paired with theirs.

Each command runs on a copy of the lab's inventory with ``ssh.persist: 0``: no connection kept between runs (a
first run, or one more than ``persist`` seconds after the last). With ``--kept``, ``provision lxc (kept)`` and
``launch sglang (kept)`` are the same commands on a copy that sets ``ssh.persist: 60`` (the default; the
benchmark's own keeper holds the node's connection between runs, as the peers' ansible-core keeps its
``ControlPersist=60s`` master); they are held against the same floors.

The replay floor of each command (once a round): the remote commands one converged run of it sent (captured once,
from the last tree, before the rounds), replayed as sent over one paramiko connection, nothing judged: the same
remote work with the least client. A command's time over its replay floor is what gpuhost's own client costs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "bench")]

from gpuhost.lab import manager  # noqa: E402
from gpuhost.lab.spec import NodeSpec  # noqa: E402
from tests.lab_fixtures import lab_address, start_lab  # noqa: E402

COMMANDS = ("provision", "verify-lxc", "launch", "verify-serve")
PEERS = ROOT / "bench" / "peers"
#: the jobs run once a round, timed alone (no tree): floors and peers
REFERENCES = ("floor", "replay", "ansible", "pyinfra")
#: a remote command's line in a run log: "STAMP [HOST] 0.012s rc=0 $ COMMAND" (gpuhost.cli.verbose.format_record)
_COMMAND_LINE = re.compile(r"^\S+ \[(?P<host>[^\]]+)\] (?P<took>\S+) rc=\S+ \$ (?P<cmd>.*)$")


def gpuhost(
    src: Path, inventory: Path, *args: str, report: bool = True, env: dict[str, str] | None = None
) -> tuple[float, dict[str, Any]]:
    """``gpuhost ARGS -i INVENTORY`` (``--json`` with ``report``, its object returned), which must exit 0."""
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    start = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "gpuhost", *args, "-i", str(inventory), *(("--json",) if report else ())],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    wall = time.perf_counter() - start
    if r.returncode != 0 or (report and not r.stdout.startswith("{")):
        raise SystemExit(f"gpuhost {' '.join(args)} ({src}) exited {r.returncode}:\n{(r.stdout + r.stderr)[-3000:]}")
    return wall, json.loads(r.stdout) if report else {}


#: runs gpuhost as ``python -m gpuhost`` does, recording every command it sends (paramiko's ``exec_command``)
_CAPTURE = """
import json, os, sys
import paramiko
sent = []
real = paramiko.Channel.exec_command
def exec_command(self, command):
    sent.append(command.decode() if isinstance(command, bytes) else command)
    return real(self, command)
paramiko.Channel.exec_command = exec_command
import atexit
atexit.register(lambda: open(os.environ["GPUHOST_BENCH_SENT"], "w").write(json.dumps(sent)))
sys.argv = ["gpuhost", *sys.argv[1:]]
from gpuhost.cli.app import console
console()
"""


def capture(src: Path, inventory: Path, args: tuple[str, ...], out: Path) -> Path:
    """The remote commands one run of ``gpuhost ARGS`` sends (a converged run: it must exit 0), as a JSON list.

    A converged run first, so that the captured one reads what a converged run remembered (the lab's first build
    changed the node, and a run records only what it read before its first change)."""
    gpuhost(src, inventory, *args)
    env = {**os.environ, "PYTHONPATH": str(src), "GPUHOST_BENCH_SENT": str(out)}
    argv = [sys.executable, "-c", _CAPTURE, *args, "-i", str(inventory), "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900, check=False)
    if r.returncode != 0:
        raise SystemExit(f"capture of gpuhost {' '.join(args)} exited {r.returncode}:\n{(r.stdout + r.stderr)[-3000:]}")
    return out


def remote_commands(log: Path) -> list[str]:
    """The remote commands a run's ``--log`` recorded (``gpuhost.remote``), each cut to its first line."""
    if not log.exists():
        return []
    found = (_COMMAND_LINE.match(ln) for ln in log.read_text().splitlines())
    return [f"[{m['host']}] {m['took']} {m['cmd'][:160]}" for m in found if m]


Job = Callable[[Path, str, int], dict[str, Any]]


def measured(name: str, inventory: Path, args: tuple[str, ...], logs: Path, env: dict[str, str] | None = None) -> Job:
    def once(src: Path, tree: str, rnd: int) -> dict[str, Any]:
        log = logs / f"{name.replace(' ', '-').replace('(', '').replace(')', '')}-{tree}-{rnd}.log"
        playbook = args[0] in ("provision", "launch")
        logged = ("--log", str(log)) if playbook and rnd == 0 else ()
        wall, doc = gpuhost(src, inventory, *args, *logged, env=env)
        if "hosts" in doc:  # a playbook run
            changed = sum(int(h["changed"]) for h in doc["hosts"].values())
            if changed:
                raise SystemExit(f"{name} ({tree}): {changed} change(s) on a converged re-run")
            trips = sum(int(h.get("round_trips") or 0) for h in doc["hosts"].values())
        else:  # a verify report
            trips = int(doc.get("round_trips") or 0)
        out: dict[str, Any] = {"command": name, "tree": tree, "wall_s": round(wall, 3), "round_trips": trips}
        if playbook and rnd == 0:  # the warm-up's log: which commands they were
            out["commands"] = remote_commands(log)
        return out

    return once


def floor_job(name: str, handle: Any, node: str, *check: str) -> Job:
    """``bench/commands_floor.py``: the checks (or the replay of a run's commands) in one paramiko connection (a
    subprocess, as a user runs it)."""
    script = ROOT / "bench" / "commands_floor.py"
    address = handle.node(node).address

    def once(_src: Path, _tree: str, _rnd: int) -> dict[str, Any]:
        argv = [sys.executable, str(script), str(handle.client_key), str(handle.known_hosts), address, *check]
        start = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        wall = time.perf_counter() - start
        if r.returncode != 0:
            raise SystemExit(f"{name}: {r.stdout}{r.stderr}")
        return {"command": name, "tree": "floor", "wall_s": round(wall, 3), "round_trips": 0}

    return once


def peer_jobs(lab: str, handle: Any, node: str, work: Path, *extra: tuple[str, str]) -> list[Job]:
    """ansible-playbook and pyinfra running ``bench/peers/*/{lab}`` against ``node`` (host keys checked, as the
    converge benchmark sets them up); ``extra``: the workload's variables (``-e`` for ansible, the environment
    as ``BENCH_NAME`` for pyinfra)."""
    from converge import pyinfra_exe
    from startup import ansible_playbook

    work.mkdir(parents=True, exist_ok=True)
    address, key, known = handle.node(node).address, handle.client_key, handle.known_hosts
    (work / "inventory.ini").write_text(f"[pve]\n{node} ansible_host={address} ansible_user=root\n")
    (work / "cp").mkdir(exist_ok=True)
    (work / "ansible.cfg").write_text(
        "[defaults]\ngathering = explicit\nhost_key_checking = True\nretry_files_enabled = False\n"
        f"interpreter_python = /usr/bin/python3\nprivate_key_file = {key}\n"
        f"[ssh_connection]\npipelining = True\ncontrol_path_dir = {work / 'cp'}\n"
        f"ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile={known} "
        "-o StrictHostKeyChecking=yes\n"
    )
    settings = {"ssh_user": "root", "ssh_key": str(key), "ssh_known_hosts_file": str(known)}
    settings["ssh_strict_host_key_checking"] = "yes"
    (work / "inventory.py").write_text(f"pve = {[(address, settings)]!r}\n")
    ansible, why = ansible_playbook()
    if ansible is None:
        raise SystemExit(why)
    variables = [a for k, v in extra for a in ("-e", f"{k}={v}")]
    runs = {
        "ansible": ([str(ansible), "-i", "inventory.ini", str(PEERS / "ansible" / f"{lab}.yml"), *variables], {}),
        "pyinfra": (
            [str(pyinfra_exe()), "-y", "inventory.py", str(PEERS / "pyinfra" / f"{lab}.py")],
            {f"BENCH_{k.upper()}": v for k, v in extra},
        ),
    }

    def job(tool: str) -> Job:
        argv, env = runs[tool]

        def once(_src: Path, _tree: str, _rnd: int) -> dict[str, Any]:
            full = {**os.environ, "ANSIBLE_CONFIG": str(work / "ansible.cfg"), **env}
            start = time.perf_counter()
            r = subprocess.run(argv, cwd=work, env=full, capture_output=True, text=True, timeout=300, check=False)
            wall = time.perf_counter() - start
            if r.returncode != 0:
                raise SystemExit(f"{tool} {lab} exited {r.returncode}:\n{(r.stdout + r.stderr)[-3000:]}")
            return {"command": f"{tool} {lab}", "tree": "floor", "wall_s": round(wall, 3), "round_trips": 0}

        return once

    return [job("ansible"), job("pyinfra")]


def persisting(inventory: Path, seconds: int) -> Path:
    """The same inventory with ``ssh.persist: SECONDS`` on every node, beside it (its relative key paths still
    hold): 0 for a run with no kept connection (a first run, or one more than ``persist`` after the last)."""
    doc = yaml.safe_load(inventory.read_text())
    for node in doc["nodes"].values():
        node.setdefault("ssh", {})["persist"] = seconds
    out = inventory.with_name(f"{inventory.stem}-{'kept' if seconds else 'cold'}.yml")
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def stop_keeper(run_dir: Path) -> None:
    """The keeper the kept runs started (it would leave on its own 60 s after the lab went away)."""
    import signal

    try:
        os.kill(int((run_dir / "gpuhost" / "persist.pid").read_text()), signal.SIGTERM)
    except (OSError, ValueError):
        pass


def provision_lab(state: Path, srcs: list[Path]) -> tuple[Any, Path]:
    spec = NodeSpec("pve1", lab_address(18, 1), boot="systemd-boot", cpu="amd", pve=8, gpus=8)
    handle = start_lab(state, [spec])
    for src in srcs:  # the first builds it; each tree then converges it its own way (nothing to change after)
        gpuhost(src, handle.inventory, "provision", "lxc", "--allow-reboot", "--allow-restart", report=False)
    return handle, handle.inventory


def serve_lab(state: Path, srcs: list[Path]) -> tuple[Path, Any, Any]:
    from tests.integration.lab.test_launch_sglang import serving_lab

    gen = serving_lab(state, lab_address(18, 9))
    handle = next(gen)
    inventory = handle.state_dir / "launch.yml"
    for src in srcs:
        gpuhost(src, inventory, "launch", "sglang", report=False)  # a first start's progress lines
    return inventory, gen, handle


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds after one warm-up (default 3)")
    ap.add_argument("--only", default=",".join(COMMANDS), help=f"comma list of {', '.join(COMMANDS)}")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument(
        "--kept",
        action="store_true",
        help="also time provision lxc and launch sglang with ssh.persist: 60 (each NAME (kept))",
    )
    ap.add_argument(
        "--src",
        type=Path,
        action="append",
        help="a gpuhost src to time (repeat: the trees take turns on the same labs, paired per round; "
        "default: this checkout's)",
    )
    args = ap.parse_args(argv)
    srcs = [p.resolve() for p in (args.src or [ROOT / "src"])]
    trees = [f"{i}:{p.parent.name}" for i, p in enumerate(srcs)]
    wanted = [c for c in args.only.split(",") if c]
    log = sys.stderr if args.json else sys.stdout
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpuhost-bench-commands-") as tmp:
        cleanup: list[Callable[[], None]] = []
        try:
            jobs: list[Job] = []
            floors: list[Job] = []  # one per lab, run once a round
            logs = Path(tmp) / "logs"
            logs.mkdir()
            kept_env = {"XDG_RUNTIME_DIR": str(Path(tmp) / "run")}  # this benchmark's own keeper (--kept)
            cleanup.append(lambda: stop_keeper(Path(tmp) / "run"))

            def add(chosen: list[tuple[str, tuple[str, ...]]], inventory: Path, handle: Any, node: str) -> None:
                """Each chosen command timed, its replay floor, and (--kept, a playbook command) its kept twin."""
                cold = persisting(inventory, 0)
                for name, argv in chosen:
                    jobs.append(measured(name, cold, argv, logs))
                    sent = capture(srcs[-1], cold, argv, Path(tmp) / f"{name.replace(' ', '-')}.json")
                    floors.append(floor_job(f"replay {name}", handle, node, "replay", str(sent)))
                    if args.kept and argv[0] in ("provision", "launch"):
                        jobs.append(measured(f"{name} (kept)", persisting(inventory, 60), argv, logs, kept_env))

            if {"provision", "verify-lxc"} & set(wanted):
                print("provision lab: building (first provision lxc) ...", file=log)
                handle, inv = provision_lab(Path(tmp) / "plab", srcs)
                cleanup.append(lambda h=handle: (h.close(), manager.down(h.state_dir)))
                chosen = []
                if "provision" in wanted:
                    chosen.append(("provision lxc", ("provision", "lxc", "--allow-reboot", "--allow-restart")))
                if "verify-lxc" in wanted:
                    chosen.append(("verify lxc", ("verify", "lxc")))
                add(chosen, inv, handle, "pve1")
                floors.append(floor_job("floor lxc", handle, "pve1", "lxc", "200"))
                floors += peer_jobs("lxc", handle, "pve1", Path(tmp) / "peers-lxc", ("ctid", "200"))
            if {"launch", "verify-serve"} & set(wanted):
                print("serve lab: building (first launch sglang) ...", file=log)
                sinv, gen, shandle = serve_lab(Path(tmp) / "slab", srcs)
                cleanup.append(gen.close)
                chosen = []
                if "launch" in wanted:
                    chosen.append(("launch sglang", ("launch", "sglang")))
                if "verify-serve" in wanted:
                    chosen.append(("verify serve", ("verify", "serve")))
                add(chosen, sinv, shandle, "sgl")
                url = f"http://{shandle.node('sgl').address}:30000/health"
                floors.append(floor_job("floor serve", shandle, "sgl", "serve", "230", url))
                floors += peer_jobs(
                    "serve", shandle, "sgl", Path(tmp) / "peers-serve", ("ctid", "230"), ("health", url)
                )
            for rnd in range(args.rounds + 1):
                for job in jobs:
                    turn = list(zip(srcs, trees, strict=True))
                    shift = rnd % len(turn)
                    for src, tree in turn[shift:] + turn[:shift]:  # the trees' order rotates
                        runs.append({**job(src, tree, rnd), "round": rnd})
                for floor in floors:
                    runs.append({**floor(ROOT, "floor", rnd), "round": rnd})
                print(f"round {rnd}{' (warm-up)' if rnd == 0 else ''} done", file=log)
        finally:
            for undo in reversed(cleanup):
                undo()
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for name in dict.fromkeys(r["command"] for r in runs):
        for tree in trees if not name.startswith(REFERENCES) else ["floor"]:
            mine = [r for r in runs if r["command"] == name and r["tree"] == tree and r["round"] > 0]
            summary.setdefault(name, {})[tree] = {
                "wall_s": round(statistics.median(r["wall_s"] for r in mine), 3),
                "wall_min_s": min(r["wall_s"] for r in mine),
                "wall_max_s": max(r["wall_s"] for r in mine),
                "round_trips": max(r["round_trips"] for r in mine),
            }
    over_floor: dict[str, float] = {}  # paired: the median over rounds of the last tree's time over its lab's floor
    over_replay: dict[str, float] = {}  # and over its replay floor
    peers_over: dict[str, dict[str, float]] = {}  # paired: each peer's time over the last tree's
    walls = {(r["command"], r["tree"], r["round"]): r["wall_s"] for r in runs if r["round"] > 0}
    for name in summary:
        if name.startswith(REFERENCES):
            continue
        lab = "lxc" if name.startswith(("provision lxc", "verify lxc")) else "serve"
        base = name.removesuffix(" (kept)")
        for ref, into in ((f"floor {lab}", over_floor), (f"replay {base}", over_replay)):
            if ref in summary:
                pairs = [walls[(name, trees[-1], k)] / walls[(ref, "floor", k)] for k in range(1, args.rounds + 1)]
                into[name] = round(statistics.median(pairs), 3)
        for peer in ("ansible", "pyinfra"):  # the peer's time over this command's: how much faster gpuhost is
            if f"{peer} {lab}" in summary:
                pairs = [
                    walls[(f"{peer} {lab}", "floor", k)] / walls[(name, trees[-1], k)]
                    for k in range(1, args.rounds + 1)
                ]
                peers_over.setdefault(name, {})[peer] = round(statistics.median(pairs), 3)
    ratios: dict[str, float] = {}
    if len(trees) > 1:  # paired: the median over rounds of the last tree's time over the first's
        for name in summary:
            if name.startswith(REFERENCES):
                continue
            by = {(r["tree"], r["round"]): r["wall_s"] for r in runs if r["command"] == name and r["round"] > 0}
            pairs = [by[(trees[-1], k)] / by[(trees[0], k)] for k in range(1, args.rounds + 1)]
            ratios[name] = round(statistics.median(pairs), 3)
    doc = {
        "schema": "gpuhost.bench.commands/1",
        "cpus": os.cpu_count(),
        "load": Path("/proc/loadavg").read_text().split()[:3],
        "rounds": args.rounds,
        "trees": dict(zip(trees, map(str, srcs), strict=True)),
        "medians": summary,
        "ratios_last_over_first": ratios,
        "ratios_over_floor": over_floor,
        "ratios_over_replay": over_replay,
        "peers_over_last": peers_over,
        "runs": runs,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"{os.cpu_count()} CPUs, load {doc['load']}; {args.rounds} rounds after a warm-up")
    print(f"{'command':<16}{'tree':<22}{'median':>9}{'min':>8}{'max':>8}{'trips':>7}")
    for name, per in summary.items():
        for tree, m in per.items():
            print(
                f"{name:<16}{tree:<22}{m['wall_s']:>8.2f}s{m['wall_min_s']:>7.2f}s{m['wall_max_s']:>7.2f}s"
                f"{m['round_trips']:>7.0f}"
            )
        if name in ratios:
            print(f"{'':<16}{'last / first':<22}{ratios[name]:>8.2f}x")
        if name in over_floor:
            print(f"{'':<16}{'last / floor':<22}{over_floor[name]:>8.2f}x")
        if name in over_replay:
            print(f"{'':<16}{'last / replay':<22}{over_replay[name]:>8.2f}x")
        for peer, ratio in peers_over.get(name, {}).items():
            print(f"{'':<16}{peer + ' / last':<22}{ratio:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
