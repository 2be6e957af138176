"""Running containers: each is a nested mount/UTS/IPC/PID namespace whose root is an overlay of
the host's Debian (read-only) and the container's own upper layer on the node's disk."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

from gpuhost.lab.node import paths, services
from gpuhost.lab.node.errors import PveError
from gpuhost.lab.node.namespaces import unshare_init
from gpuhost.lab.node.schema import parse_device

INIT_TAG = "gpuhost-lab-ct-init"
PID_DIR = "/run/lxc"


def ct_dir(vmid: int) -> Path:
    return Path(paths.CT_DISK) / "ct" / str(vmid)


def create_rootfs(vmid: int, hostname: str) -> None:
    base = ct_dir(vmid)
    if base.exists():
        shutil.rmtree(base)
    for sub in ("upper", "work", "root"):
        (base / sub).mkdir(parents=True)
    up = base / "upper"
    (up / "root").mkdir(mode=0o700)
    os.setxattr(up / "root", "trusted.overlay.opaque", b"y")
    for skel in (".bashrc", ".profile"):
        if os.path.exists(f"/etc/skel/{skel}"):
            shutil.copyfile(f"/etc/skel/{skel}", up / "root" / skel)
    (up / "etc").mkdir()
    (up / "etc" / "hostname").write_text(hostname + "\n")
    (up / "etc" / "ssh").mkdir()
    for key in os.listdir(f"{paths.CT_BASE}/etc/ssh") if os.path.isdir(f"{paths.CT_BASE}/etc/ssh") else []:
        if key.startswith("ssh_host_"):  # the container must not see the host's host keys
            os.mknod(up / "etc" / "ssh" / key, stat.S_IFCHR, os.makedev(0, 0))
    (up / "etc" / "hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {hostname}\n")
    _service_shims(up)


#: the runtime half of systemd inside a container (its PID 1 is not systemd either), as on the node
CT_SHIMS = {"systemctl": "systemctl", "journalctl": "journalctl"}


def _service_shims(up: Path) -> None:
    """``systemctl`` and ``journalctl`` of the container: the node's lab code, bind-mounted read-only at start."""
    bin_dir = up / "usr" / "local" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for command, module in CT_SHIMS.items():
        shim = bin_dir / command
        shim.write_text(
            "#!/usr/bin/python3 -I\n"
            f"# {command}: systemd's runtime simulated by the gpuhost lab inside a container\n"
            "import sys\n"
            f"sys.path.insert(0, {paths.PYTHONPATH!r})\n"
            f"from gpuhost.lab.node.cli.{module} import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        shim.chmod(0o755)


def remove_rootfs(vmid: int) -> None:
    shutil.rmtree(ct_dir(vmid), ignore_errors=True)


def device_node(path: str) -> os.stat_result:
    """PVE::LXC::Tools::get_device_mode_and_rdev."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise PveError(f"Device {path} does not exist") from None
    except OSError:
        raise PveError(f"Error accessing device {path}") from None
    if not (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        raise PveError(f"Path {path} is not a block or character device")
    return st


def init_pid(vmid: int) -> int | None:
    try:
        outer = int(open(f"{PID_DIR}/{vmid}.pid").read().strip())
        children = open(f"/proc/{outer}/task/{outer}/children").read().split()
    except (OSError, ValueError):
        return None
    for child in children:
        try:
            argv = open(f"/proc/{child}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"{INIT_TAG}-{vmid}".encode() in argv:
            return int(child)
    return None


def running(vmid: int) -> bool:
    return init_pid(vmid) is not None


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def start(vmid: int, options: dict[str, str], lxc: list[tuple[str, str]], hide: list[str]) -> None:
    devices = []
    for key in sorted((k for k in options if k.startswith("dev") and k[3:].isdigit()), key=lambda k: int(k[3:])):
        props = parse_device(key, options[key])
        st = device_node(props["path"])
        devices.append((props, st))
    base = ct_dir(vmid)
    if not (base / "upper").is_dir():
        raise PveError(f"unable to detect OS distribution: rootfs of CT {vmid} missing")
    R = str(base / "root")
    lines = [
        "set -eu",
        f"mount -t overlay ct{vmid} -o lowerdir={paths.CT_BASE},upperdir={base}/upper,workdir={base}/work {R}",
        f"mount -t proc proc {R}/proc",
        # the host kernel's driver state, as procfs shows it to a real container (NVIDIA's version, GPUs)
        f"mount --bind /proc/driver {R}/proc/driver && mount -o remount,bind,ro {R}/proc/driver || true",
        f"mount -t sysfs -o ro sysfs {R}/sys 2>/dev/null || true",
        f"mount -t tmpfs -o mode=0755,size=8m ctdev {R}/dev",
        f"mkdir -p {R}/dev/pts {R}/dev/shm {R}/dev/net",
    ]
    for name, major, minor in (
        ("null", 1, 3),
        ("zero", 1, 5),
        ("full", 1, 7),
        ("random", 1, 8),
        ("urandom", 1, 9),
        ("tty", 5, 0),
    ):
        lines.append(f"mknod -m 666 {R}/dev/{name} c {major} {minor}")
    lines += [
        f"mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts {R}/dev/pts",
        f"ln -s pts/ptmx {R}/dev/ptmx",
        f"ln -s /proc/self/fd {R}/dev/fd",
        f"mount -t tmpfs -o mode=1777 shm {R}/dev/shm",
        f"mount -t tmpfs -o mode=0755 run {R}/run",
        # the CT's startup is over once its init runs (the lab's CT init starts no boot units of its own): systemd's
        # `is-system-running` answers "running" and `--wait` returns at once (systemd systemctl-is-system-running.c)
        f": > {R}{services.BOOT_FINISHED}",
        f"mount -t tmpfs -o mode=1777 tmp {R}/tmp",
        f"[ ! -f {MEMLOCK_PRELOAD} ] || cp {MEMLOCK_PRELOAD} {R}{CT_PRELOAD}",
        # the lab code the container's systemctl/journalctl shims run (read-only)
        f"[ ! -d {paths.PYTHONPATH}/gpuhost ] || {{ mkdir -p {R}{paths.PYTHONPATH} && "
        f"mount --bind {paths.PYTHONPATH} {R}{paths.PYTHONPATH} && mount -o remount,bind,ro {R}{paths.PYTHONPATH}; }}",
    ]
    for path in hide:
        lines.append(f"[ ! -d {R}{path} ] || mount -t tmpfs -o mode=0700,size=1m hide {R}{path}")
    for props, st in devices:
        kind = "c" if stat.S_ISCHR(st.st_mode) else "b"
        target = f"{R}{props['path']}"
        mode = props.get("mode", "0660")
        lines += [
            f"mkdir -p $(dirname {_q(target)})",
            f"mknod -m {mode} {_q(target)} {kind} {os.major(st.st_rdev)} {os.minor(st.st_rdev)}",
            f"chown {props.get('uid', '0')}:{props.get('gid', '0')} {_q(target)}",
        ]
    for key, value in lxc:
        if key == "lxc.mount.entry":
            lines += _mount_entry(R, value)
    lines += [
        f"hostname {_q(options.get('hostname', f'CT{vmid}'))}",
        f"cd {R}",
        "mkdir -p .pivot",
        "pivot_root . .pivot",
        "cd /",
        "umount -l /.pivot",
        "rmdir /.pivot",
        f"exec /bin/sh -c 'trap \"exit 0\" TERM; while :; do sleep 3600 & wait $!; done' {INIT_TAG}-{vmid}",
    ]
    os.makedirs(PID_DIR, exist_ok=True)
    log = (
        open(f"/var/log/gpuhost-lab/ct-{vmid}.log", "ab")
        if os.path.isdir("/var/log/gpuhost-lab")
        else subprocess.DEVNULL
    )
    proc = subprocess.Popen(
        [*unshare_init(ipc=True), "-c", "\n".join(lines)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        close_fds=True,
    )
    with open(f"{PID_DIR}/{vmid}.pid", "w") as fh:
        fh.write(f"{proc.pid}\n")
    deadline = time.monotonic() + 10
    while init_pid(vmid) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise PveError(f"startup for container '{vmid}' failed")
        time.sleep(0.01)
    _apply_prlimits(vmid, init_pid(vmid), lxc)


#: LXC starts containers with the limits of its own process: an 8 MiB memlock on current kernels
DEFAULT_MEMLOCK = 8 * 1024 * 1024
MEMLOCK_PRELOAD = f"{paths.LAB_LIB}/prlimit-memlock.so"
CT_PRELOAD = "/run/gpuhost-lab-prlimit-memlock.so"


def _memlock_file(vmid: int) -> str:
    return f"{PID_DIR}/{vmid}.memlock"


def _prlimit_file(vmid: int) -> str:
    return f"{PID_DIR}/{vmid}.prlimit-memlock"


def _apply_prlimits(vmid: int, pid: int | None, lxc: list[tuple[str, str]]) -> None:
    """``lxc.prlimit.memlock`` (bytes or ``unlimited``, ``soft:hard`` allowed), set on the container's
    init at start; ``pct exec`` processes get it too (see :func:`exec_in`). Where the machine does
    not let root raise the hard limit (no CAP_SYS_RESOURCE), the container gets the lab's preload,
    which reports the configured limit."""
    import resource

    for stale in (_memlock_file(vmid), _prlimit_file(vmid)):
        try:
            os.unlink(stale)
        except OSError:
            pass
    if pid is None:
        return
    value: str | None = None
    for key, v in lxc:
        if key == "lxc.prlimit.memlock":
            value = v.strip()
    if value is not None:  # what the started container's config carries, for exec_in
        with open(_prlimit_file(vmid), "w") as fh:
            fh.write(value + "\n")
    if value is None:
        resource.prlimit(pid, resource.RLIMIT_MEMLOCK, (DEFAULT_MEMLOCK, DEFAULT_MEMLOCK))
        return
    soft, _, hard = value.partition(":")

    def parse(v: str) -> int:
        return resource.RLIM_INFINITY if v == "unlimited" else int(v)

    try:
        resource.prlimit(pid, resource.RLIMIT_MEMLOCK, (parse(soft), parse(hard or soft)))
    except PermissionError:
        with open(_memlock_file(vmid), "w") as fh:
            fh.write(soft if soft == "unlimited" else str(parse(soft)))


def _mount_entry(R: str, value: str) -> list[str]:
    """``lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file``."""
    fields = value.split()
    if len(fields) < 4:
        return []
    source, target, _fstype, options = fields[:4]
    opts = options.split(",")
    if "bind" not in opts and "rbind" not in opts:
        return []
    dest = f"{R}/{target.lstrip('/')}"
    create = "file" if "create=file" in opts else ("dir" if "create=dir" in opts else "")
    prepare = {
        "file": f"mkdir -p $(dirname {_q(dest)}); [ -e {_q(dest)} ] || : > {_q(dest)}",
        "dir": f"mkdir -p {_q(dest)}",
        "": ":",
    }[create]
    mount = f"{prepare}; mount --bind {_q(source)} {_q(dest)}"
    if "ro" in opts:
        mount += f"; mount -o remount,bind,ro {_q(dest)}"
    if "optional" in opts:
        return [f"if [ -e {_q(source)} ]; then {mount}; fi"]
    return [f"[ -e {_q(source)} ] || {{ echo 'lxc.mount.entry: {source} does not exist' >&2; exit 1; }}", mount]


def hotplug_device(vmid: int, props: dict[str, str]) -> None:
    """A new ``devN`` on a running container appears at once: pve-container LXC.pm:2336-2390
    ``device_passthrough_hotplug`` makes the node and moves it into the container's mount namespace
    (called from Config.pm:1729-1735 ``vmconfig_hotplug_pending`` for a key not set yet)."""
    pid = init_pid(vmid)
    if pid is None:
        raise PveError(f"CT {vmid} not running")
    st = device_node(props["path"])
    target = f"/proc/{pid}/root{props['path']}"  # the container's own /dev, through its init's root
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            os.unlink(target)
        os.mknod(target, (st.st_mode & 0o170000) | int(props.get("mode", "0660"), 8), st.st_rdev)
        os.chmod(target, int(props.get("mode", "0660"), 8))
        os.chown(target, int(props.get("uid", "0")), int(props.get("gid", "0")))
    except OSError as exc:
        raise PveError(f"failed to hotplug device {props['path']} into CT {vmid}: {exc}") from None


def stop(vmid: int) -> None:
    pid = init_pid(vmid)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 5
        while init_pid(vmid) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
    try:
        os.unlink(f"{PID_DIR}/{vmid}.pid")
    except OSError:
        pass


def exec_in(vmid: int, argv: list[str]) -> int:
    pid = init_pid(vmid)
    if pid is None:
        raise PveError(f"CT {vmid} not running")
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "TERM": os.environ.get("TERM", "dumb"),
        "LANG": "C.UTF-8",
    }
    import resource

    try:
        memlock = resource.prlimit(pid, resource.RLIMIT_MEMLOCK)
    except OSError:
        memlock = None

    # pct exec is lxc-attach (pve-container src/PVE/CLI/pct.pm:250), which applies the started
    # container's lxc.prlimit.* to the attached process (lxc/lxc src/lxc/attach.c:1711-1714
    # setup_resource_limits → conf.c:2971-2996 prlimit(pid, …), since c6d09e15c, LXC 2.1): with one
    # configured, exec gets it (the value as of the last start); without, the caller's own limit stays.
    if not os.path.exists(_prlimit_file(vmid)):
        memlock = None

    def container_limits() -> None:
        if memlock is not None:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, memlock)

    try:
        configured = open(_memlock_file(vmid)).read().strip()
    except OSError:
        configured = ""
    if configured:  # set inside the container (the path exists there only)
        argv = ["/usr/bin/env", f"LD_PRELOAD={CT_PRELOAD}", f"GPUHOST_LAB_MEMLOCK={configured}", *argv]

    return subprocess.call(
        ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-p", "-r", "-w", "--"] + argv,
        env=env,
        preexec_fn=container_limits,
    )


def ct_path(vmid: int, path: str) -> str:
    pid = init_pid(vmid)
    if pid is None:
        raise PveError(f"CT {vmid} not running")
    return f"/proc/{pid}/root/{path.lstrip('/')}"
