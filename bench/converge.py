"""A converged run of the same work in gpuhost, ansible-core and pyinfra, against the same lab nodes.

    python3 bench/converge.py                  # W1 and W2 on 1, 4 and 16 nodes, and with 30 ms RTT; 5 rounds
    python3 bench/converge.py --rounds 7 --json
    python3 bench/converge.py --only w1_1,w1_1_rtt30 --rounds 3

Needs root (the lab's namespaces). Starts ``gpuhost lab up --nodes 16`` in its own state directory,
runs every tool as a user would, in subprocesses (``gpuhost run PLAY -i INV --json``,
``ansible-playbook -i inventory.ini PLAY``, ``pyinfra -y inventory.py deploy.py``), and stops the lab.
Workloads live in ``bench/converge/`` (one file per tool and workload, same templates):

* W1: a module line in /etc/modules, a templated /etc/modprobe.d/vfio.conf, a guarded command.
* W2: the host role's converged checks: the kernel command-line file, a modules-load file, two
  templated units enabled, a guarded boot-loader refresh.

Every tool checks host keys against the lab's known_hosts file. ansible-core (pipelining,
``ControlPersist=600s``, ``gathering = explicit``, forks 16) and pyinfra are installed into their own
virtual environments under ``~/.cache/gpuhost-bench/`` from the package registry on first use.
gpuhost is this checkout's ``src``, run twice: with ``ssh.persist: 0`` (``gpuhost``: no connection kept between
runs, as a first run or one more than ``persist`` seconds after the last) and with ``ssh.persist: 600`` in its
inventory (``gpuhost_kept``: the user's keeper holds each node's connection between runs, one keeper for the
benchmark in its own ``XDG_RUNTIME_DIR``), as ansible-core keeps its masters here (``ControlPersist=600s``);
600 s because a scenario comes back once a round, two minutes later. The floor is ``bench/converge/floor.py``:
paramiko, one connection per node, W1's three reads; run on 1 and 16 nodes, as installed here (paramiko imports
invoke, fabric's dependency) and lean (``--lean``: paramiko alone, as gpuhost imports it).

Each tool's first run converges the nodes (gpuhost runs first; the others must then find nothing to
change). Then one warm-up round and ``--rounds`` measured rounds, interleaved (every round runs every
scenario and tool, tool order rotating), each run checked for 0 changes. Medians are per scenario and
tool; ratios are paired (the median over rounds of the two tools' times in the same round).

Added latency: this kernel has no ``sch_netem``, so ``tc netem`` is unavailable. The ``_rtt30``
scenarios go through a userspace TCP proxy in this process (asyncio, on a loopback address this
script picks) that holds every chunk 15 ms in each direction before forwarding it to the lab node.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "converge"
sys.path.insert(0, str(ROOT / "bench"))
from startup import ansible_playbook, cache_dir  # noqa: E402

LAB_ADDRESS = "127.0.152.1"  # first lab node; nodes are consecutive
PROXY_BASE = "127.0.153."  # the latency proxy's listening addresses
ONE_WAY_DELAY = 0.015
TOOLS = ("gpuhost", "gpuhost_kept", "pyinfra", "ansible")
GPUHOSTS = ("gpuhost", "gpuhost_kept")  # gpuhost_kept: the inventory sets ssh.persist: 600
FLOORS = ("floor", "floor_lean")  # paramiko as installed here (it imports invoke), and paramiko alone
ALL_SCENARIOS = ("w1_1", "w1_4", "w1_16", "w2_1", "w2_16", "w1_1_rtt30", "w2_1_rtt30")


# -- tools -------------------------------------------------------------------------------------
def pyinfra_exe() -> Path:
    venv = cache_dir() / "pyinfra"
    exe = venv / "bin" / "pyinfra"
    if not exe.exists():
        print(f"installing pyinfra into {venv} (first use) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "pyinfra>=3.10,<4"],
            check=True,
            capture_output=True,
        )
    return exe


def version_of(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return (r.stdout or r.stderr).strip().splitlines()[0] if (r.stdout or r.stderr).strip() else "?"


# -- the latency proxy -------------------------------------------------------------------------
class DelayProxy:
    """Forwards ``listen`` → ``target``, holding every chunk ``delay`` seconds in each direction."""

    def __init__(self, pairs: list[tuple[str, str]], delay: float) -> None:
        self.pairs, self.delay = pairs, delay
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not self.ready.wait(10):
            raise SystemExit("latency proxy did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        for listen, target in self.pairs:
            self.loop.run_until_complete(
                asyncio.start_server(lambda r, w, t=target: self._client(r, w, t), listen, 22, reuse_address=True)
            )
        self.ready.set()
        self.loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: str) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(target, 22)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer), return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def pump() -> None:
            while True:
                data = await reader.read(65536)
                await queue.put((self.loop.time() + self.delay, data))
                if not data:
                    return

        async def drain() -> None:
            while True:
                due, data = await queue.get()
                wait = due - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    writer.close()
                    return
                writer.write(data)
                await writer.drain()

        await asyncio.gather(pump(), drain(), return_exceptions=True)

    def stop(self) -> None:
        """Left running (a daemon thread): ssh control masters may still hold proxied connections."""


# -- scenarios ---------------------------------------------------------------------------------
@dataclass
class Scenario:
    name: str
    workload: str  # w1 | w2
    nodes: list[tuple[str, str]]  # (name, address the tools connect to)
    dir: Path


@dataclass
class Run:
    tool: str
    scenario: str
    round: int  # 0 = warm-up
    wall_s: float
    changed: int
    round_trips: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def write_inventories(sc: Scenario, lab: Path, known_hosts: Path) -> None:
    sc.dir.mkdir(parents=True, exist_ok=True)
    key = lab / "client_key"
    nodes = {
        name: {
            "address": addr,
            "ssh": {
                "user": "root",
                "port": 22,
                "key_file": str(key),
                "known_hosts_file": str(known_hosts),
                "host_key_policy": "strict",
            },
        }
        for name, addr in sc.nodes
    }
    cold = {name: {**n, "ssh": {**n["ssh"], "persist": 0}} for name, n in nodes.items()}
    (sc.dir / "gpuhost.yml").write_text(yaml.safe_dump({"vars": {}, "nodes": cold, "groups": {}}))
    kept = {name: {**n, "ssh": {**n["ssh"], "persist": 600}} for name, n in nodes.items()}
    (sc.dir / "gpuhost_kept.yml").write_text(yaml.safe_dump({"vars": {}, "nodes": kept, "groups": {}}))
    ini = ["[pve]"] + [f"{n} ansible_host={a} ansible_user=root" for n, a in sc.nodes]
    (sc.dir / "inventory.ini").write_text("\n".join(ini) + "\n")
    cp = sc.dir / "cp"
    cp.mkdir(exist_ok=True)
    (sc.dir / "ansible.cfg").write_text(
        "[defaults]\n"
        "gathering = explicit\nhost_key_checking = True\nforks = 16\nretry_files_enabled = False\n"
        f"interpreter_python = /usr/bin/python3\nprivate_key_file = {key}\n"
        "[ssh_connection]\npipelining = True\n"
        f"control_path_dir = {cp}\n"
        f"ssh_args = -o ControlMaster=auto -o ControlPersist=600s -o UserKnownHostsFile={known_hosts} "
        "-o StrictHostKeyChecking=yes\n"
    )
    hosts = [
        (
            a,
            {
                "ssh_hostname": a,
                "ssh_user": "root",
                "ssh_key": str(key),
                "ssh_known_hosts_file": str(known_hosts),
                "ssh_strict_host_key_checking": "yes",
            },
        )
        for _, a in sc.nodes
    ]
    (sc.dir / "inventory.py").write_text(f"pve = {hosts!r}\n")


def run_tool(tool: str, sc: Scenario, exes: dict[str, Path], lab: Path, known_hosts: Path) -> Run:
    env = dict(os.environ)
    w = sc.workload
    if tool in GPUHOSTS:
        env["PYTHONPATH"] = str(ROOT / "src")
        env["XDG_RUNTIME_DIR"] = str(sc.dir.parent / "run")  # this benchmark's keeper (gpuhost_kept)
        cmd = [sys.executable, "-m", "gpuhost", "run", str(WORK / "gpuhost" / f"{w}.yml")]
        cmd += ["-i", str(sc.dir / f"{tool}.yml"), "--forks", "16", "--json"]
        cwd = WORK / "gpuhost"
    elif tool == "ansible":
        env["ANSIBLE_CONFIG"] = str(sc.dir / "ansible.cfg")
        cmd = [str(exes["ansible"]), "-i", str(sc.dir / "inventory.ini"), str(WORK / "ansible" / f"{w}.yml")]
        cwd = WORK / "ansible"
    elif tool == "pyinfra":
        cmd = [str(exes["pyinfra"]), "-y", "--parallel", "16", str(sc.dir / "inventory.py")]
        cmd += [str(WORK / "pyinfra" / f"{w}.py")]
        cwd = sc.dir
    else:  # floor, floor_lean
        cmd = [sys.executable, str(WORK / "floor.py"), *(["--lean"] if tool == "floor_lean" else [])]
        cmd += [str(lab / "client_key"), str(known_hosts), *(addr for _, addr in sc.nodes)]
        cwd = WORK
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    out = r.stdout + r.stderr
    if r.returncode != 0:
        raise SystemExit(f"{tool} {sc.name} exited {r.returncode}:\n{out[-3000:]}")
    trips = None
    if tool in GPUHOSTS:
        doc = json.loads(r.stdout)
        changed = sum(h["changed"] for h in doc["hosts"].values())
        trips = max(h.get("round_trips") or 0 for h in doc["hosts"].values())
        seen = len(doc["hosts"])
    elif tool == "ansible":
        recap = re.findall(r"changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", r.stdout)
        changed = sum(int(c) for c, _, _ in recap)
        seen = len(recap)
    elif tool == "pyinfra":
        changed = pyinfra_changes(out)
        seen = len(set(re.findall(r"^\s*\[(\S+)\]\s+Ready:", out, re.M)))
    else:
        changed = int(re.search(r"changed=(\d+)", r.stdout).group(1))  # type: ignore[union-attr]
        seen = len(sc.nodes)
    if seen != len(sc.nodes):
        raise SystemExit(f"{tool} {sc.name}: reported {seen} hosts, not {len(sc.nodes)}:\n{out[-3000:]}")
    return Run(tool, sc.name, -1, round(wall, 4), changed, trips)


def pyinfra_changes(out: str) -> int:
    """Operations that changed something: the Success column of pyinfra's "Grand total" row ("-" is 0)."""
    m = re.search(r"^\s*Grand total\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$", out, re.M)
    if m is None:
        raise SystemExit(f"pyinfra printed no results table:\n{out[-3000:]}")
    success, error = m.group(2), m.group(3)
    if error != "-":
        raise SystemExit(f"pyinfra reported errors:\n{out[-3000:]}")
    return 0 if success == "-" else int(success)


# -- main --------------------------------------------------------------------------------------
def uptime() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def paired(runs: list[Run], a: str, b: str, scenario: str) -> float | None:
    ta = {r.round: r.wall_s for r in runs if r.tool == a and r.scenario == scenario and r.round > 0}
    tb = {r.round: r.wall_s for r in runs if r.tool == b and r.scenario == scenario and r.round > 0}
    pairs = [ta[k] / tb[k] for k in ta if k in tb]
    return round(statistics.median(pairs), 3) if pairs else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds after one warm-up (default 5)")
    ap.add_argument("--only", default=",".join(ALL_SCENARIOS), help="comma list of scenarios")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument(
        "--tools",
        default=",".join(TOOLS + FLOORS),
        help="comma list of tools to run (default: all; ratios need both of their tools)",
    )
    ap.add_argument("--state-dir", type=Path, default=Path("/run/gpuhost-bench-converge"))
    args = ap.parse_args(argv)
    scenarios = [s for s in args.only.split(",") if s]
    chosen = {t for t in args.tools.split(",") if t}
    log = sys.stderr if args.json else sys.stdout

    exes = {"pyinfra": pyinfra_exe()}
    ans, why = ansible_playbook()
    if ans is None:
        raise SystemExit(why)
    exes["ansible"] = ans
    versions = {
        "gpuhost": "this checkout",
        "ansible": version_of([str(ans), "--version"]),
        "pyinfra": version_of([str(exes["pyinfra"]), "--version"]),
        "python": sys.version.split()[0],
    }
    state = args.state_dir
    if state.exists():
        subprocess.run(
            [sys.executable, "-m", "gpuhost", "lab", "down", "--state-dir", str(state / "lab")],
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            capture_output=True,
            check=False,
        )
        shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    lab = state / "lab"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    n_max = max(int(s.split("_")[1]) for s in scenarios)
    load_before = uptime()
    print(f"load before: {load_before}; starting {n_max} lab nodes ...", file=log)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuhost",
            "lab",
            "up",
            "--nodes",
            str(n_max),
            "--address",
            LAB_ADDRESS,
            "--state-dir",
            str(lab),
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    proxy = None
    try:
        inv = yaml.safe_load((lab / "inventory.yml").read_text())
        nodes = [(name, n["address"]) for name, n in inv["nodes"].items()]
        # known_hosts for the lab addresses and the proxy addresses in front of them
        kh_lines = (lab / "known_hosts").read_text().splitlines()
        extra = []
        for i, (_, addr) in enumerate(nodes):
            for line in kh_lines:
                if line.split(" ", 1)[0] in (addr, f"[{addr}]:22"):
                    extra.append(f"{PROXY_BASE}{i + 1} " + line.split(" ", 1)[1])
        known_hosts = state / "known_hosts"
        known_hosts.write_text("\n".join(kh_lines + extra) + "\n")
        built: list[Scenario] = []
        rtt = [s for s in scenarios if s.endswith("_rtt30")]
        if rtt:
            proxy = DelayProxy([(f"{PROXY_BASE}1", nodes[0][1])], ONE_WAY_DELAY)
        for s in scenarios:
            parts = s.split("_")
            count = int(parts[1])
            sel = nodes[:count]
            if s.endswith("_rtt30"):
                sel = [(name, f"{PROXY_BASE}{i + 1}") for i, (name, _) in enumerate(sel)]
            sc = Scenario(s, parts[0], sel, state / s)
            write_inventories(sc, lab, known_hosts)
            built.append(sc)
        # converge every node once with gpuhost (the first run changes things)
        for w in sorted({sc.workload for sc in built}):
            big = max((sc for sc in built if sc.workload == w), key=lambda sc: len(sc.nodes))
            run_tool("gpuhost", big, exes, lab, known_hosts)
        runs: list[Run] = []
        for rnd in range(args.rounds + 1):
            for k, sc in enumerate(built):
                tools = [t for t in TOOLS if t in chosen]
                tools += [t for t in FLOORS if t in chosen and sc.name in ("w1_1", "w1_16")]
                shift = (rnd + k) % len(tools)
                for tool in tools[shift:] + tools[:shift]:
                    r = run_tool(tool, sc, exes, lab, known_hosts)
                    r.round = rnd
                    runs.append(r)
                    if r.changed:
                        raise SystemExit(f"{tool} {sc.name} round {rnd}: {r.changed} change(s); not converged")
            print(f"round {rnd}{' (warm-up)' if rnd == 0 else ''} done, load {uptime()}", file=log)
        load_after = uptime()
    finally:
        if proxy:
            proxy.stop()
        subprocess.run(
            [sys.executable, "-m", "gpuhost", "lab", "down", "--state-dir", str(lab)],
            env=env,
            capture_output=True,
            check=False,
        )

    medians: dict[str, dict[str, float]] = {}
    for sc in built:
        for tool in (*TOOLS, *FLOORS):
            ts = [r.wall_s for r in runs if r.tool == tool and r.scenario == sc.name and r.round > 0]
            if ts:
                medians.setdefault(sc.name, {})[tool] = round(statistics.median(ts), 3)
    ratios: dict[str, dict[str, float | None]] = {"floor_16_over_1": {}}
    for g in GPUHOSTS:
        ratios[f"ansible_over_{g}"] = {s.name: paired(runs, "ansible", g, s.name) for s in built}
        ratios[f"pyinfra_over_{g}"] = {s.name: paired(runs, "pyinfra", g, s.name) for s in built}
        ratios[f"{g}_over_floor"] = {
            "w1_1": paired(runs, g, "floor", "w1_1"),
            "w1_1_lean": paired(runs, g, "floor_lean", "w1_1"),
        }
        ratios[f"{g}_16_over_1"] = {}
        for w in ("w1", "w2"):
            a = {r.round: r.wall_s for r in runs if r.tool == g and r.scenario == f"{w}_16" and r.round > 0}
            b = {r.round: r.wall_s for r in runs if r.tool == g and r.scenario == f"{w}_1" and r.round > 0}
            pairs = [a[k] / b[k] for k in a if k in b]
            if pairs:
                ratios[f"{g}_16_over_1"][w] = round(statistics.median(pairs), 3)
    # what 16 nodes cost a minimal client on this machine: the same lab, the floor script
    fa = {r.round: r.wall_s for r in runs if r.tool == "floor" and r.scenario == "w1_16" and r.round > 0}
    fb = {r.round: r.wall_s for r in runs if r.tool == "floor" and r.scenario == "w1_1" and r.round > 0}
    fpairs = [fa[k] / fb[k] for k in fa if k in fb]
    if fpairs:
        ratios["floor_16_over_1"]["w1"] = round(statistics.median(fpairs), 3)
    trips = {
        sc.name: max((r.round_trips or 0) for r in runs if r.tool in GPUHOSTS and r.scenario == sc.name) for sc in built
    }
    doc = {
        "schema": "gpuhost.bench.converge/1",
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": load_after,
        "rounds": args.rounds,
        "versions": versions,
        "latency": f"userspace TCP proxy, {ONE_WAY_DELAY * 1000:.0f} ms each way (no sch_netem on this kernel)",
        "gpuhost_round_trips": trips,
        "medians": medians,
        "ratios": ratios,
        "runs": [asdict(r) for r in runs],
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"{os.cpu_count()} CPUs, load {load_before} -> {load_after}; {args.rounds} rounds after a warm-up")
    print(f"versions: {versions}")
    print(f"{doc['latency']} for *_rtt30")
    head = "".join(f"{t:>13}" for t in (*TOOLS, *FLOORS))
    print(f"{'scenario':<12}{head}{'pyi/gh':>8}{'pyi/kept':>9}{'trips':>6}")
    for sc in built:
        m = medians.get(sc.name, {})
        cells = "".join(f"{m[t]:>12.2f}s" if t in m else f"{'':>13}" for t in (*TOOLS, *FLOORS))
        rp, rk = ratios["pyinfra_over_gpuhost"][sc.name], ratios["pyinfra_over_gpuhost_kept"][sc.name]
        print(f"{sc.name:<12}{cells}{rp or 0:>7.2f}x{rk or 0:>8.2f}x{trips[sc.name]:>6}")
    for g in GPUHOSTS:
        print(
            f"{g}/floor (w1_1): {ratios[f'{g}_over_floor']['w1_1']}x "
            f"(paramiko alone: {ratios[f'{g}_over_floor']['w1_1_lean']}x); "
            f"16 nodes / 1 node: {ratios[f'{g}_16_over_1']}, floor {ratios['floor_16_over_1']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
