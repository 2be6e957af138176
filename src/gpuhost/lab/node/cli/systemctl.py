"""systemctl of a lab node: unit-file verbs go to the real systemctl (they work without a running
systemd); runtime verbs (start, stop, is-active, daemon-reload, ...) are served by :mod:`services`."""

from __future__ import annotations

import os
import sys
import time

from gpuhost.lab.node import services

REAL = "/usr/bin/systemctl"
_UNIT_FILE_VERBS = {
    "enable",
    "disable",
    "reenable",
    "mask",
    "unmask",
    "preset",
    "is-enabled",
    "cat",
    "list-unit-files",
    "get-default",
    "set-default",
    "edit",
    "revert",
    "link",
}
_VALUE_OPTIONS = {"-p", "--property", "-t", "--type", "--state", "-o", "--output", "-n", "--lines", "--root"}


def main(argv: list[str]) -> int:
    options, words = [], []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-"):
            options.append(arg)
            if arg in _VALUE_OPTIONS and i + 1 < len(argv):
                options.append(argv[i + 1])
                i += 1
        else:
            words.append(arg)
        i += 1
    verb, units = (words[0], words[1:]) if words else ("list-units", [])
    quiet = "-q" in options or "--quiet" in options
    now = "--now" in options
    try:
        if verb in _UNIT_FILE_VERBS:
            real = [REAL] + [o for o in options if o != "--now"] + [verb] + units
            rc = _call(real)
            if rc == 0 and now and verb in ("enable", "reenable"):
                for unit in units:
                    services.start(unit)
            if rc == 0 and now and verb in ("disable", "mask"):
                for unit in units:
                    services.stop(unit)
            return rc
        if verb in ("daemon-reload", "daemon-reexec"):
            return 0  # unit files are read afresh at every start
        if verb in ("start", "restart", "reload", "try-restart", "reload-or-restart", "condrestart"):
            for unit in units:
                if verb == "try-restart" and services.active_state(services.unit_name(unit)) != "active":
                    continue
                if verb != "start":
                    services.stop(unit)
                services.start(unit)
            return 0
        if verb == "stop":
            for unit in units:
                services.stop(unit)
            return 0
        if verb in ("is-active", "is-failed"):
            states = [services.active_state(services.unit_name(u)) for u in units]
            if not quiet:
                print("\n".join(states))
            want = "active" if verb == "is-active" else "failed"
            return 0 if any(s == want for s in states) else (3 if verb == "is-active" else 1)
        if verb == "status":
            rc = 0
            for unit in units:
                name = services.unit_name(unit)
                st = services.read_state(name)
                active = services.active_state(name)
                path = services.unit_path(name)
                print(
                    f"● {name}\n     Loaded: {'loaded (' + path + ')' if path else 'not-found (Reason: Unit ' + name + ' not found.)'}"
                    f"\n     Active: {active} ({st.get('sub', 'dead')})"
                    + (f"\n   Main PID: {st['pid']}" if st.get("pid") else "")
                )
                rc = rc or (0 if active == "active" else (4 if path is None else 3))
            return rc
        if verb == "show":
            for unit in units:
                name = services.unit_name(unit)
                st = services.read_state(name)
                since = st.get("since")
                stamp = time.strftime("%a %Y-%m-%d %H:%M:%S %Z", time.localtime(float(str(since)))) if since else ""
                print(
                    f"Id={name}\nActiveState={services.active_state(name)}\nSubState={st.get('sub', 'dead')}\n"
                    f"MainPID={st.get('pid', 0)}\nLoadState={'loaded' if services.unit_path(name) else 'not-found'}\n"
                    f"UnitFileState={_unit_file_state(name)}\nExecMainStartTimestamp={stamp}\n"
                    f"ExecMainStartTimestampMonotonic={st.get('since_monotonic_us', 0) if since else 0}"
                )
            return 0
        if verb == "is-system-running":
            # systemd: "starting" while boot units run; --wait blocks until startup is over.
            deadline = time.monotonic() + 120
            while "--wait" in options and not services.boot_finished() and time.monotonic() < deadline:
                time.sleep(0.05)
            state = "running" if services.boot_finished() else "starting"
            if not quiet:
                print(state)
            return 0 if state == "running" else 1
        if verb == "reboot":
            from gpuhost.lab.node.cli.reboot import main as reboot

            return reboot([])
        if verb == "list-units":
            for name in sorted(os.listdir(services.STATE_DIR)) if os.path.isdir(services.STATE_DIR) else []:
                unit = name[:-5]
                print(f"{unit} loaded {services.active_state(unit)} {services.read_state(unit).get('sub', 'dead')}")
            return 0
    except services.UnitError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    print(f"Unknown command verb '{verb}' (not supported in this lab node).", file=sys.stderr)
    return 1


def _unit_file_state(name: str) -> str:
    """What the real systemctl's ``is-enabled`` says of the unit file (it works without a running systemd)."""
    import subprocess

    r = subprocess.run([REAL, "is-enabled", name], capture_output=True, text=True, check=False)
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""


def _call(argv: list[str]) -> int:
    import subprocess

    return subprocess.call(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
