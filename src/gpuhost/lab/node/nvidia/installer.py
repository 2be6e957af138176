"""The ``.run`` installer's program (``nvidia-installer``), run from the extracted archive.

Host mode builds "the kernel module" for the running kernel (needs its headers: the
``/lib/modules/<kernel>/build`` link), registers it with DKMS when ``--dkms`` is given *and*
``dkms`` is installed (otherwise it silently installs a plain module, as the real installer does),
installs the userspace and loads the module, unless another version is loaded: that one stays
loaded until a reboot. ``--no-kernel-modules`` installs the userspace only (containers).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from . import kernel, paths

MANIFEST = "/var/lib/nvidia/gpuhost-lab-installed.json"
LOG = "/var/log/nvidia-installer.log"
BUILD_SECONDS = 1.0
KNOWN_FLAGS = {
    "--silent",
    "-s",
    "--no-x-check",
    "--no-nouveau-check",
    "--dkms",
    "--no-dkms",
    "--no-kernel-modules",
    "--no-kernel-module",
    "--accept-license",
    "-a",
    "--no-questions",
    "-q",
    "--ui=none",
    "--disable-nouveau",
    "--no-cc-version-check",
    "--no-drm",
    "--install-libglvnd",
    "--no-install-libglvnd",
    "--allow-installation-with-running-driver",
}
#: the daemon holds /dev/nvidiactl open while it runs (its pid file; NVIDIA's unit removes the directory on stop)
PERSISTENCED_PID = "/var/run/nvidia-persistenced/nvidia-persistenced.pid"
LOADED_IN_USE = (
    "WARNING: An NVIDIA kernel module 'nvidia' appears to be already loaded in your kernel.  This may be because "
    "it is in use (for example, by an X server, a CUDA program, or the NVIDIA Persistence Daemon), but this may "
    "also happen if your kernel was configured without support for module unloading.  Some of the sanity checks "
    "that nvidia-installer performs to detect potential installation problems are not possible while an NVIDIA "
    "kernel module is running."
)
MODULES = ("nvidia", "nvidia-uvm", "nvidia-modeset", "nvidia-drm", "nvidia-peermem")
TOOLS = {
    "nvidia-smi": ("smi", "main", True),
    "nvidia-modprobe": ("tools", "modprobe_main", False),
    "nvidia-persistenced": ("tools", "persistenced_main", False),
}
NO_KERNEL_SOURCE = (
    "ERROR: Unable to find the kernel source tree for the currently running kernel.  Please make sure you have "
    "installed the kernel source files for your kernel and that they are properly configured; on Red Hat Linux "
    "systems, for example, be sure you have the 'kernel-source' or 'kernel-devel' RPM installed.  If you know the "
    "correct kernel source files are installed, you may specify the kernel source path with the "
    "'--kernel-source-path' command line option."
)


class InstallError(Exception):
    pass


class Log:
    def __init__(self) -> None:
        os.makedirs(os.path.dirname(LOG), exist_ok=True)
        self.fh = open(LOG, "w")

    def __call__(self, line: str) -> None:
        self.fh.write(line + "\n")
        self.fh.flush()


def main(argv: list[str]) -> int:
    payload, version, args = argv[0], argv[1], argv[2:]
    if "--version" in args or "-v" in args:
        print(f"\nnvidia-installer:  version {version}\n  The NVIDIA Software Installer for Unix/Linux.")
        return 0
    flags: set[str] = set()
    module_type = "proprietary"
    for arg in args:
        if arg.startswith("-m=") or arg.startswith("--kernel-module-type="):
            value = arg.split("=", 1)[1]
            module_type = "open" if value in ("kernel-open", "open") else "proprietary"
        elif arg in KNOWN_FLAGS:
            flags.add(arg)
        else:
            print(
                f'nvidia-installer: Unrecognized option: "{arg}"\n\nERROR: Invalid commandline, please run '
                "`nvidia-installer --help` for usage information.",
                file=sys.stderr,
            )
            return 1
    if os.geteuid() != 0:
        print("ERROR: nvidia-installer must be run as root", file=sys.stderr)
        return 1
    log = Log()
    log(f"nvidia-installer log file '{LOG}'\ncreation time: {time.ctime()}\ninstaller version: {version}")
    log(f"command line:\n    ./nvidia-installer {' '.join(args)}")
    try:
        userspace_only = bool(flags & {"--no-kernel-modules", "--no-kernel-module"})
        kernel_release = _uname_r()
        if not userspace_only and not os.path.exists(f"/lib/modules/{kernel_release}/build"):
            raise InstallError(NO_KERNEL_SOURCE)
        skip_load = False
        if not userspace_only:
            skip_load = _unload_running(log, "--allow-installation-with-running-driver" in flags)
        _remove_previous(log)
        installed: list[str] = []
        if not userspace_only:
            installed += _install_modules(version, module_type, kernel_release, "--dkms" in flags, log)
        installed += _install_userspace(payload, version, log)
        _write_manifest(version, installed, userspace_only)
        if not userspace_only and not skip_load:
            _load(version, log)
    except InstallError as exc:
        log(str(exc))
        print(f"\n{exc}\n", file=sys.stderr)
        print(
            f"ERROR: Installation has failed.  Please see the file '{LOG}' for details.  You may find "
            "suggestions on fixing installation problems in the README available on the Linux driver download "
            "page at www.nvidia.com.",
            file=sys.stderr,
        )
        return 1
    log(
        f"Installation of the NVIDIA Accelerated Graphics Driver for Linux-x86_64 (version: {version}) is now complete."
    )
    return 0


def _uname_r() -> str:
    return subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()


def _remove_previous(log: Log) -> None:
    try:
        with open(MANIFEST) as fh:
            old = json.load(fh)
    except (OSError, ValueError):
        return
    log(f"Uninstalling the previous installation (version {old.get('version')}).")
    for path in old.get("files", []):
        try:
            if os.path.islink(path) or os.path.isfile(path):
                os.unlink(path)
            elif os.path.isdir(path):
                shutil.rmtree(path)
        except OSError:
            pass


def _install_modules(version: str, module_type: str, kernel_release: str, dkms: bool, log: Log) -> list[str]:
    files: list[str] = []
    use_dkms = dkms and shutil.which("dkms") is not None
    if dkms and not use_dkms:
        log(
            "WARNING: Failed to run `dkms --version`: dkms is not installed; the kernel module will be installed "
            "without DKMS and will have to be rebuilt by hand after a kernel update."
        )
    log(f"-> Kernel source path: '/lib/modules/{kernel_release}/build'")
    log("-> Building kernel modules")
    time.sleep(BUILD_SECONDS)  # a real build takes minutes; the lab's, long enough to be seen
    log("-> Kernel module compilation complete.")
    target = f"/lib/modules/{kernel_release}/{'updates/dkms' if use_dkms else 'kernel/drivers/video'}"
    os.makedirs(target, exist_ok=True)
    for name in MODULES:
        text = kernel.render_module_file(
            name.replace("-", "_"),
            version,
            kernel_release,
            flavour=module_type,
            license="Dual MIT/GPL" if module_type == "open" else "NVIDIA",
            description=f"NVIDIA {name} kernel module",
        )
        path = f"{target}/{name}.ko"
        with open(path, "w") as fh:
            fh.write(text)
        files.append(path)
        if use_dkms:
            built = f"/var/lib/dkms/nvidia/{version}/{kernel_release}/x86_64/module"
            os.makedirs(built, exist_ok=True)
            shutil.copyfile(path, f"{built}/{name}.ko")
    if use_dkms:
        src = f"/usr/src/nvidia-{version}"
        os.makedirs(src, exist_ok=True)
        with open(f"{src}/dkms.conf", "w") as fh:
            fh.write(
                f'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="{version}"\nAUTOINSTALL="yes"\n'
                + "".join(
                    f'BUILT_MODULE_NAME[{i}]="{m}"\nDEST_MODULE_LOCATION[{i}]="/kernel/drivers/video"\n'
                    for i, m in enumerate(MODULES)
                )
            )
        os.makedirs("/var/lib/dkms/nvidia", exist_ok=True)
        link = f"/var/lib/dkms/nvidia/{version}/source"
        if not os.path.islink(link):
            os.symlink(src, link)
        files += [src, f"/var/lib/dkms/nvidia/{version}"]
        log(f"Registering the kernel modules with DKMS: nvidia/{version}, {kernel_release}, x86_64: installed")
    return files


def _install_userspace(payload: str, version: str, log: Log) -> list[str]:
    files: list[str] = []
    os.makedirs(paths.LIB_DIR, exist_ok=True)
    for lib, soname in (("libcuda.so", "libcuda.so.1"), ("libnvidia-ml.so", "libnvidia-ml.so.1")):
        real = f"{paths.LIB_DIR}/{lib}.{version}"
        shutil.copyfile(f"{payload}/lib/{lib}", real)
        os.chmod(real, 0o755)
        files.append(real)
        for link, target in ((f"{paths.LIB_DIR}/{soname}", f"{lib}.{version}"), (f"{paths.LIB_DIR}/{lib}", soname)):
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(target, link)
            files.append(link)
    if os.path.isdir(paths.TOOLS_DIR):
        shutil.rmtree(paths.TOOLS_DIR)
    os.makedirs(paths.TOOLS_DIR)
    shutil.copytree(
        f"{payload}/nvidia_lab", f"{paths.TOOLS_DIR}/nvidia_lab", ignore=shutil.ignore_patterns("__pycache__")
    )
    files.append(paths.TOOLS_DIR)
    for tool, (module, func, takes_version) in TOOLS.items():
        path = f"/usr/bin/{tool}"
        call = f"{func}(sys.argv[1:], {version!r})" if takes_version else f"{func}(sys.argv[1:])"
        with open(path, "w") as fh:
            fh.write(
                f"#!/usr/bin/python3 -I\n# {tool} {version} (NVIDIA driver simulated by the gpuhost lab)\n"
                f"import sys\nsys.path.insert(0, {paths.TOOLS_DIR!r})\n"
                f"from nvidia_lab.{module} import {func}\nsys.exit({call})\n"
            )
        os.chmod(path, 0o755)
        files.append(path)
    subprocess.run(["ldconfig"], capture_output=True)
    log(
        f"Installed the NVIDIA userspace {version} (libcuda, libnvidia-ml, nvidia-smi, nvidia-modprobe, "
        "nvidia-persistenced)."
    )
    return files


def _write_manifest(version: str, files: list[str], userspace_only: bool) -> None:
    os.makedirs(os.path.dirname(MANIFEST), exist_ok=True)
    with open(MANIFEST, "w") as fh:
        json.dump({"version": version, "userspace_only": userspace_only, "files": files}, fh, indent=1)


def _unload_running(log: Log, allow_running: bool) -> bool:
    """NVIDIA/nvidia-installer kernel.c:1687-1745 ``check_for_loaded_kernel_modules``: a loaded NVIDIA
    module is unloaded (rmmod); one that stays loaded because it is in use makes the installer ask
    continue/abort, and ``--silent`` takes the default, ABORT, unless ``--allow-installation-with-running-
    driver`` (then the module load is skipped: True). Capture of the abort: NVIDIA/cuda-samples#286."""
    if "nvidia" not in kernel.loaded():
        return False
    if not os.path.exists(PERSISTENCED_PID):
        for name in ("nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia_uvm", "nvidia"):
            try:
                kernel.unload(name)
            except kernel.ModuleError:
                break
        if "nvidia" not in kernel.loaded():
            return False
    log(LOADED_IN_USE)
    if not allow_running:
        raise InstallError(f"{LOADED_IN_USE}\n\n(Answer: Abort installation)")
    log(
        "WARNING: Continuing installation despite the presence of a loaded NVIDIA kernel module.  Some sanity "
        "checks will not be performed.  It is strongly recommended that you reboot your computer after "
        "installation is complete."
    )
    log("Kernel module load tests will be skipped.")
    return True


def _load(version: str, log: Log) -> None:
    if not kernel.on_node():
        raise InstallError(
            "ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when "
            "this kernel module was built against the wrong or improperly configured kernel sources"
        )
    current = kernel.loaded().get("nvidia")
    if current is not None:
        if current.get("version") != version:
            log(
                f"WARNING: An NVIDIA kernel module 'nvidia' ({current.get('version')}) appears to be loaded and in "
                f"use; the newly installed module ({version}) will be loaded at the next reboot."
            )
        return
    try:
        kernel.load("nvidia")
    except kernel.ModuleError as exc:
        raise InstallError(  # noqa: B904 - the installer prints its own text, as NVIDIA's does
            "ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when "
            "this kernel module was built against the wrong or improperly configured kernel "
            f"sources, with a version of gcc that differs from the one used to build the target "
            f"kernel, or if another driver, such as nouveau, is present and prevents the NVIDIA "
            f"kernel module from obtaining ownership of the NVIDIA device(s) (modprobe: {exc})."
        )
    kernel.create_gpu_nodes()
    log("Kernel module load succeeded.")
