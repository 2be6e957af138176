"""What a serving target shows: its Python and glibc, its GPUs, the server's unit, state, journal and answers.

Every fact here is read-only. The live ones (the start-up watch, the probe) are never cached: each ask reads anew.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.facts import serve_layout as target
from gpuhost.facts.batch import parse_sections, sections_command
from gpuhost.facts.tool_output import last_json_object
from gpuhost.resources import tool_command

_RUNTIME = "import sys, platform; print('python', *sys.version_info[:3]); print('libc', *platform.libc_ver())"


@dataclass(frozen=True)
class RuntimeFacts:
    """``python3`` and the C library of the target (``None`` when absent or unreadable)."""

    python: tuple[int, int, int] | None
    libc: str | None
    libc_version: tuple[int, ...] | None


def _version(text: str) -> tuple[int, ...] | None:
    m = re.match(r"(\d+(?:\.\d+)*)", text)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def parse_runtime(result: CommandResult) -> RuntimeFacts:
    python: tuple[int, int, int] | None = None
    libc: str | None = None
    libc_version: tuple[int, ...] | None = None
    for line in result.stdout.splitlines():
        parts = line.split()
        if parts[:1] == ["python"] and len(parts) == 4 and all(p.isdigit() for p in parts[1:]):
            python = (int(parts[1]), int(parts[2]), int(parts[3]))
        elif parts[:1] == ["libc"] and len(parts) == 3:
            libc, libc_version = parts[1], _version(parts[2])
    return RuntimeFacts(python, libc, libc_version)


serve_runtime: Fact[RuntimeFacts] = Fact(
    "python and glibc", lambda: f"python3 -c {shlex.quote(_RUNTIME)} 2>/dev/null", parse_runtime
)


@dataclass(frozen=True)
class GpuRow:
    compute_cap: str
    driver: str
    memory_used_mib: int | None
    memory_total_mib: int | None

    @property
    def arch(self) -> str:
        major, _, minor = self.compute_cap.partition(".")
        return f"sm{major}{minor or '0'}"


_GPU_QUERY = "nvidia-smi --query-gpu=compute_cap,driver_version,memory.used,memory.total --format=csv,noheader,nounits"


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_gpus(result: CommandResult) -> list[GpuRow]:
    rows: list[GpuRow] = []
    if result.exit_code != 0:
        return rows
    for line in result.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 4 and re.fullmatch(r"\d+\.\d+", cells[0]):
            rows.append(GpuRow(cells[0], cells[1], _int(cells[2]), _int(cells[3])))
    return rows


serve_gpus: Fact[list[GpuRow]] = Fact("GPUs for serving", lambda: f"{_GPU_QUERY} 2>/dev/null", parse_gpus)


@dataclass(frozen=True)
class ServiceState:
    """The unit's state, the start token of the current start, and what gpuhost recorded launching."""

    active: str
    token: str | None
    launched: dict[str, Any] = field(default_factory=dict)


def parse_service(result: CommandResult) -> ServiceState:
    s = parse_sections(result.stdout)
    active = s["active"].output.strip().splitlines()[-1] if "active" in s and s["active"].output.strip() else "unknown"
    token = s["marker"].output.strip() if "marker" in s and s["marker"].ok else None
    launched: dict[str, Any] = {}
    if "state" in s and s["state"].ok:
        try:
            loaded = json.loads(s["state"].output)
            launched = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            launched = {}
    return ServiceState(active, token if token and target.valid_token(token) else None, launched)


def service_probes() -> dict[str, str]:
    """The sections :func:`parse_service` reads (a caller may batch them with others into one trip)."""
    return {
        "active": f"systemctl is-active {target.UNIT}",
        "marker": f"cat {target.MARKER_FILE}",
        "state": f"cat {target.STATE_FILE}",
    }


def _service_command() -> str:
    return sections_command(service_probes())


#: no args
serve_service: Fact[ServiceState] = Fact("sglang service", _service_command, lambda r, *_a: parse_service(r))


@dataclass(frozen=True)
class ProofState:
    """The server's current start (``MAINPID@MONOTONIC_US``, None when not running) and the proof record
    (:data:`~gpuhost.facts.serve_layout.PROVED_FILE`: the start and configuration the full proof passed on)."""

    start: str | None
    proved: dict[str, Any]

    def proven(self, config_sha256: str | None) -> bool:
        """The full proof passed on this very start of the server, running this configuration."""
        return self.start is not None and self.proved == {"start": self.start, "config_sha256": config_sha256}


def _proof_command() -> str:
    # systemd's per-start properties of a service (org.freedesktop.systemd1.Service: MainPID,
    # ExecMainStartTimestampMonotonic): both change at every start, a restart by hand included
    return sections_command(
        {
            "start": f"systemctl show -p MainPID -p ExecMainStartTimestampMonotonic {target.UNIT}",
            "proved": f"cat {target.PROVED_FILE}",
        }
    )


def parse_proof(result: CommandResult, *_args: Any) -> ProofState:
    s = parse_sections(result.stdout)
    props = dict(line.split("=", 1) for line in (s["start"].output if "start" in s else "").splitlines() if "=" in line)
    pid, since = props.get("MainPID", "0").strip(), props.get("ExecMainStartTimestampMonotonic", "0").strip()
    start = f"{pid}@{since}" if pid.isdigit() and since.isdigit() and pid != "0" and since != "0" else None
    proved: dict[str, Any] = {}
    if "proved" in s and s["proved"].ok:
        try:
            loaded = json.loads(s["proved"].output)
            proved = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            proved = {}
    return ProofState(start, proved)


#: no args
serve_proof: Fact[ProofState] = Fact("sglang proof record", _proof_command, parse_proof)


def journal_command(lines: int = 200_000) -> str:
    return f"journalctl -u {target.UNIT} -o cat --no-pager -q -n {lines}"


def _probe_command(url: str, mode: str, model: str, timeout: float) -> str:
    """The serve probe with its arguments, run by the target's python3."""
    args = [url, mode, "--env-file", target.ENV_FILE, "--model", model, "--timeout", str(timeout)]
    return tool_command("python3", "serve_probe.py", args)


def parse_probe(result: CommandResult, *_args: Any) -> dict[str, Any]:
    data = last_json_object(result.stdout)
    if data is None:
        return {"health": None, "error": f"probe failed (exit {result.exit_code}): {result.stderr.strip()[-300:]}"}
    return data


#: args: url, mode (health|verify|info), served model name, timeout
serve_probe: Fact[dict[str, Any]] = Fact("sglang probe", _probe_command, parse_probe, live=True)


@dataclass(frozen=True)
class Watch:
    """One look at a start: the journal, the unit's state, ``/health``, and the start's marker token (the journal
    lines after ``gpuhost-sglang: start TOKEN`` are this start's)."""

    journal: str
    active: str
    health: int | None
    health_error: str | None
    token: str | None = None

    @property
    def lines(self) -> list[str] | None:
        """This start's journal lines; None before its marker is in the journal (or without a marker)."""
        return None if self.token is None else target.lines_of_start(self.journal, self.token)


def _watch_command(url: str) -> str:
    return sections_command(
        {
            "marker": f"cat {target.MARKER_FILE}",
            "journal": journal_command(),
            "active": f"systemctl is-active {target.UNIT}",
            "probe": _probe_command(url, "health", "default", 5.0),
        }
    )


def parse_watch(result: CommandResult, *_args: Any) -> Watch:
    s = parse_sections(result.stdout)
    journal = s["journal"].output if "journal" in s else ""
    active = s["active"].output.strip() if "active" in s and s["active"].output.strip() else "unknown"
    token = s["marker"].output.strip() if "marker" in s and s["marker"].ok else None
    probe: dict[str, Any] = {}
    if "probe" in s:
        try:
            probe = json.loads(s["probe"].output.strip().splitlines()[-1])
        except (ValueError, IndexError):
            probe = {}
    code = probe.get("health")
    valid = token if token and target.valid_token(token) else None
    return Watch(journal, active, code if isinstance(code, int) else None, probe.get("error"), valid)


#: args: url
serve_watch: Fact[Watch] = Fact("sglang start-up", _watch_command, parse_watch, live=True)


def _cache_command(cache_dir: str) -> str:
    return f"find {shlex.quote(cache_dir)} -type f -print -quit 2>/dev/null"


#: args: SGLang's cache directory on the target (SGLANG_CACHE_DIR): whether an earlier start left JIT builds or
#: autotune results there (a start with none is a first start: it compiles and tunes from scratch)
sglang_cache_warm: Fact[bool] = Fact("sglang cache", _cache_command, lambda r, *_a: bool(r.stdout.strip()))


def _versions_command(venv: str, packages: tuple[str, ...]) -> str:
    code = (
        "import importlib.metadata as m, sys\n"
        "for p in sys.argv[1:]:\n"
        "    try: print(p, m.version(p))\n"
        "    except m.PackageNotFoundError: print(p, '-')\n"
    )
    return f"{shlex.quote(venv + '/bin/python')} -c {shlex.quote(code)} {shlex.join(packages)} 2>/dev/null"


def parse_versions(result: CommandResult, *_args: Any) -> dict[str, str]:
    out = {}
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] != "-":
            out[parts[0]] = parts[1]
    return out


#: args: venv, package names
venv_versions: Fact[dict[str, str]] = Fact("venv packages", _versions_command, parse_versions)


def hf_args(repo: str, revision: str, cache_dir: str, endpoint: str, token_file: str | None) -> list[str]:
    """The arguments of ``tools/hf_fetch.py`` (the token's file, never the token)."""
    args = ["--repo", repo, "--revision", revision, "--cache-dir", cache_dir, "--endpoint", endpoint]
    args += ["--record-dir", target.MODEL_RECORD_DIR]
    return args + (["--token-file", token_file] if token_file else [])


def _avail_command(path: str) -> str:
    """``df -B1 --output=avail`` of the directory, or of its nearest existing parent before it is made."""
    return f'd={shlex.quote(path)}; while [ ! -e "$d" ]; do d=$(dirname "$d"); done; df -B1 --output=avail "$d"'


def _snapshot_command(repo: str, revision: str, cache_dir: str, endpoint: str, token_file: str | None) -> str:
    return sections_command(
        {
            "status": tool_command(
                "python3", "hf_fetch.py", ["status", *hf_args(repo, revision, cache_dir, endpoint, token_file)]
            ),
            "avail": _avail_command(cache_dir),
        }
    )


@dataclass(frozen=True)
class SnapshotState:
    """A Hugging Face snapshot in the target's cache against the repository's listing, and the free space there."""

    status: dict[str, Any]
    avail: int | None

    @property
    def error(self) -> str | None:
        err = self.status.get("error")
        return str(err) if err else None


def parse_snapshot(result: CommandResult, *_args: Any) -> SnapshotState:
    s = parse_sections(result.stdout)
    status: dict[str, Any] = {"error": "the snapshot status printed nothing"}
    if "status" in s and s["status"].output.strip():
        try:
            status = json.loads(s["status"].output.strip().splitlines()[-1])
        except ValueError:
            status = {"error": f"the snapshot status printed no JSON: {s['status'].output.strip()[-300:]}"}
    avail = None
    if "avail" in s and s["avail"].status == 0:
        numbers = [ln.strip() for ln in s["avail"].output.splitlines() if ln.strip().isdigit()]
        avail = int(numbers[-1]) if numbers else None
    return SnapshotState(status if isinstance(status, dict) else {"error": "not a JSON object"}, avail)


#: args: repo, revision, cache dir, endpoint, token file
hf_snapshot: Fact[SnapshotState] = Fact("hugging face snapshot", _snapshot_command, parse_snapshot)
