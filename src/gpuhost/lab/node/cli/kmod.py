"""modprobe, modinfo and lsmod of a lab node: the simulated kernel's modules."""

from __future__ import annotations

import os
import sys

from gpuhost.lab.node.nvidia import kernel


def modprobe_main(argv: list[str]) -> int:
    remove = any(a in ("-r", "--remove") for a in argv)
    quiet = any(a in ("-q", "--quiet") for a in argv)
    names = [a for a in argv if not a.startswith("-")]
    if not remove and len(names) > 1 and not any(a in ("-a", "--all") for a in argv):
        names = names[:1]  # modprobe MODULE [PARAMS...]: the rest are parameters
    if not names:
        print("modprobe: ERROR: missing parameters. See -h.", file=sys.stderr)
        return 1
    for name in names:
        try:
            kernel.unload(name) if remove else kernel.load(name)
        except kernel.ModuleError as exc:
            if not quiet:
                print(f"modprobe: {exc}", file=sys.stderr)
            return 1
    return 0


def modinfo_main(argv: list[str]) -> int:
    field = None
    names = []
    i = 0
    while i < len(argv):
        if argv[i] in ("-F", "--field") and i + 1 < len(argv):
            field = argv[i + 1]
            i += 2
            continue
        if argv[i].startswith("--field="):
            field = argv[i].split("=", 1)[1]
        elif not argv[i].startswith("-"):
            names.append(argv[i])
        i += 1
    rc = 0
    for name in names:
        path = kernel.module_file(name)
        if path is None:
            print(f"modinfo: ERROR: Module {name} not found.", file=sys.stderr)
            rc = 1
            continue
        info = kernel.read_module_info(path)
        if field:
            if field in info:
                print(info[field])
            continue
        for key in ("filename", "version", "license", "description", "vermagic"):
            if key in info:
                print(f"{key + ':':<16}{info[key]}")
        print(f"{'name:':<16}{info.get('name', name)}")
    return rc


def lsmod_main(argv: list[str]) -> int:
    mods = kernel.loaded()
    print("Module                  Size  Used by")
    for name in reversed(list(mods)):
        users = [m for m, deps in kernel.MODULE_DEPS.items() if name in deps and m in mods]
        print(f"{name:<19} {65536:>9}  {len(users)} {','.join(users)}".rstrip())
    return 0


def main(argv: list[str]) -> int:
    tool = os.path.basename(sys.argv[0])
    return {"modprobe": modprobe_main, "modinfo": modinfo_main, "lsmod": lsmod_main}.get(tool, modprobe_main)(argv)
