"""Services of a lab node: the runtime half of systemd (the node's PID 1 is not systemd).

Unit files are systemd's own (/etc/systemd/system, /lib/systemd/system); enabling and disabling
is done by the real systemctl, which works without a running systemd. Starting runs the unit's
ExecStartPre/ExecStart/ExecStartPost for real; state lives in /run, so it ends with the boot.
At boot, init starts the units enabled in multi-user.target that were enabled on the node itself
(not the host's own units, listed in node.json as ``baseline_units``).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from typing import BinaryIO

from gpuhost.lab.node.state import load as load_state

STATE_DIR = "/run/gpuhost-lab-units"
LOG_DIR = "/var/log/gpuhost-lab/units"
UNIT_DIRS = ["/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"]
WANTS = "/etc/systemd/system/multi-user.target.wants"
ONESHOT_TIMEOUT_S = 90


class UnitError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def unit_name(name: str) -> str:
    return name if "." in name else f"{name}.service"


def unit_path(name: str) -> str | None:
    for d in UNIT_DIRS:
        path = os.path.join(d, name)
        if os.path.exists(path) and os.path.getsize(path) >= 0 and not os.path.realpath(path) == "/dev/null":
            return path
    return None


def parse_unit(path: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    text = open(path).read().replace("\\\n", " ")
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        if current is not None and "=" in line:
            key, value = line.split("=", 1)
            current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _state_file(name: str) -> str:
    return os.path.join(STATE_DIR, name + ".json")


def read_state(name: str) -> dict[str, object]:
    try:
        with open(_state_file(name)) as fh:
            state: dict[str, object] = json.load(fh)
            return state
    except (OSError, ValueError):
        return {"active": "inactive", "sub": "dead"}


def write_state(name: str, **state: object) -> None:
    os.makedirs(STATE_DIR, exist_ok=True)
    tmp = _state_file(name) + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(state, fh)
    os.replace(tmp, _state_file(name))


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


def active_state(name: str) -> str:
    st = read_state(name)
    if st.get("active") == "active" and st.get("sub") == "running" and not _alive(st.get("pid")):
        write_state(name, active="failed", sub="failed", result="exit-code")
        return "failed"
    return str(st.get("active", "inactive"))


def _commands(service: dict[str, list[str]], key: str) -> list[tuple[list[str], bool]]:
    out = []
    for value in service.get(key, []):
        ignore = False
        while value and value[0] in "-@:+!":
            ignore = ignore or value[0] == "-"
            value = value[1:]
        if value:
            out.append((shlex.split(value), ignore))
    return out


def _env_file(path: str, env: dict[str, str]) -> None:
    """systemd's EnvironmentFile=: KEY=VALUE lines, # comments, optional quotes; a leading '-' allows a missing file."""
    optional = path.startswith("-")
    try:
        with open(path.lstrip("-")) as fh:
            text = fh.read()
    except OSError:
        if optional:
            return
        raise UnitError(f"Failed to load environment files: {path}", 1) from None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        env[key.strip()] = value


def _env(service: dict[str, list[str]]) -> dict[str, str]:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    for item in service.get("Environment", []):
        for pair in shlex.split(item):
            if "=" in pair:
                k, v = pair.split("=", 1)
                env[k] = v
    for path in service.get("EnvironmentFile", []):  # systemd: these override Environment=
        _env_file(path, env)
    return env


def _log(name: str) -> BinaryIO:
    os.makedirs(LOG_DIR, exist_ok=True)
    return open(os.path.join(LOG_DIR, name + ".log"), "ab")


def _run_sync(name: str, commands: list[tuple[list[str], bool]], env: dict[str, str]) -> bool:
    for argv, ignore in commands:
        with _log(name) as log:
            try:
                rc = subprocess.run(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, timeout=ONESHOT_TIMEOUT_S
                ).returncode
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.write(f"{exc}\n".encode())
                rc = 203
        if rc != 0 and not ignore:
            return False
    return True


def _failed(name: str) -> UnitError:
    write_state(name, active="failed", sub="failed", result="exit-code")
    return UnitError(
        f"Job for {name} failed because the control process exited with error code.\n"
        f'See "systemctl status {name}" and "journalctl -xeu {name}" for details.',
        1,
    )


def start(name: str) -> None:
    name = unit_name(name)
    path = unit_path(name)
    if path is None:
        raise UnitError(f"Failed to start {name}: Unit {name} not found.", 5)
    if active_state(name) == "active":
        return
    service = parse_unit(path).get("Service", {})
    kind = (service.get("Type") or ["simple"])[-1]
    env = _env(service)
    if not _run_sync(name, _commands(service, "ExecStartPre"), env):
        raise _failed(name)
    main = _commands(service, "ExecStart")
    if kind == "oneshot" or not main:
        if not _run_sync(name, main, env):
            raise _failed(name)
        remain = (service.get("RemainAfterExit") or ["no"])[-1].lower() in ("yes", "true", "1", "on")
        write_state(name, active="active" if remain else "inactive", sub="exited" if remain else "dead")
    else:
        argv, _ = main[0]
        try:
            with _log(name) as log:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=env,
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError:
            raise _failed(name) from None
        if kind == "forking":
            if proc.wait(ONESHOT_TIMEOUT_S) != 0:
                raise _failed(name)
            write_state(name, active="active", sub="exited")
        else:
            write_state(name, active="active", sub="running", pid=proc.pid, **_started())
            time.sleep(0.05)
            if proc.poll() not in (None, 0):
                raise _failed(name)
    _run_sync(name, _commands(service, "ExecStartPost"), env)


def stop(name: str) -> None:
    name = unit_name(name)
    path = unit_path(name)
    st = read_state(name)
    if path is not None:
        service = parse_unit(path).get("Service", {})
        if st.get("active") == "active":
            _run_sync(name, _commands(service, "ExecStop"), _env(service))
    pid = st.get("pid")
    if _alive(pid):
        try:
            os.killpg(int(str(pid)), signal.SIGTERM)
        except OSError:
            os.kill(int(str(pid)), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _alive(pid):
            os.kill(int(str(pid)), signal.SIGKILL)
    write_state(name, active="inactive", sub="dead")


def mark_running(name: str, pid: int) -> None:
    """For services init itself starts (sshd, pveproxy)."""
    write_state(name, active="active", sub="running", pid=pid, **_started())


def _started() -> dict[str, float | int]:
    """When a main process started: wall clock, and CLOCK_MONOTONIC in microseconds (systemd's
    ``ExecMainStartTimestampMonotonic``; one kernel, so comparable across the lab's nodes and containers)."""
    return {"since": time.time(), "since_monotonic_us": int(time.monotonic() * 1_000_000)}


def units_to_start_at_boot() -> list[str]:
    try:
        enabled = sorted(os.listdir(WANTS))
    except FileNotFoundError:
        return []
    baseline = set(load_state().extra.get("baseline_units", []))
    return [u for u in enabled if u not in baseline and u.endswith(".service")]


def start_enabled_units() -> list[tuple[str, str]]:
    """Start what systemd would start for multi-user.target; returns (unit, error) for failures."""
    failures = []
    for name in units_to_start_at_boot():
        try:
            start(name)
        except UnitError as exc:
            failures.append((name, str(exc)))
    return failures


BOOT_FINISHED = "/run/gpuhost-lab-boot-finished"


def mark_boot_finished() -> None:
    """Startup is over: every enabled unit was started (systemd's "running" state)."""
    with open(BOOT_FINISHED, "w") as fh:
        fh.write("running\n")


def boot_finished() -> bool:
    return os.path.exists(BOOT_FINISHED)
