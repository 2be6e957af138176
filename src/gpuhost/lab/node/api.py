"""The API paths gpuhost uses, shared by ``pvesh`` (as root@pam) and the HTTPS server (as the
logged-in user or API token). ``handle`` returns the ``data`` of PVE's JSON answer."""

from __future__ import annotations

import re
from collections.abc import Callable

from gpuhost.lab.node import acl, guests, lxc, qemu, tasks
from gpuhost.lab.node.errors import PveError, param_error
from gpuhost.lab.node.state import load as load_state

Params = dict[str, str]
_CONTROL = {"delete", "revert", "digest", "skiplock", "node", "vmid", "current", "snapshot", "background_delay"}


class NotImplementedRoute(PveError):
    pass


def _bool(params: Params, key: str) -> bool:
    return str(params.get(key, "0")).lower() in ("1", "true", "yes", "on")


def _split(value: str | None) -> list[str]:
    return [v for v in re.split(r"[,;\s]+", value or "") if v]


def _options(params: Params) -> Params:
    return {k: v for k, v in params.items() if k not in _CONTROL}


def _changes(params: Params) -> tuple[Params, list[str], list[str]]:
    """A config PUT's new values, its ``delete`` and its ``revert`` lists (the same for VMs and containers)."""
    return _options(params), _split(params.get("delete")), _split(params.get("revert"))


def _check_node(node: str) -> None:
    if node != guests.nodename():
        raise PveError(
            f"hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known",
            http_status=500,
        )


def version_info() -> dict[str, str]:
    from gpuhost.lab.node.versions import manager_version

    version, build = manager_version()
    return {"version": version, "release": version.rsplit(".", 1)[0], "repoid": build}


def handle(method: str, path: str, params: Params, authuser: str) -> object:
    method = method.upper()
    path = "/" + path.strip("/")
    for pattern, handlers in ROUTES:
        m = pattern.fullmatch(path)
        if m:
            handler = handlers.get(method)
            if handler is None:
                raise NotImplementedRoute(f"Method '{method} {path}' not implemented", http_status=501)
            args: dict[str, object] = dict(m.groupdict())
            if "node" in args:
                _check_node(str(args["node"]))
            if "vmid" in args:
                args["vmid"] = guests.parse_vmid(str(args["vmid"]))
            _check_privileges(method, path, params, authuser, args)
            return handler(params=params, authuser=authuser, **args)
    raise NotImplementedRoute(f"Method '{method} {path}' not implemented", http_status=501)


def _check_privileges(method: str, path: str, params: Params, authuser: str, args: dict[str, object]) -> None:
    """The ACL half of each API method's ``permissions`` (the root@pam-only half is schema.py's), as
    pve-container/qemu-server declare them; see :mod:`gpuhost.lab.node.acl`."""
    vmid = args.get("vmid")
    if vmid is None:
        if method == "POST" and re.fullmatch(r"/nodes/[^/]+/(lxc|qemu)", path):
            new = guests.parse_vmid(params.get("vmid", ""))
            # API2/LXC.pm create_vm and API2/Qemu.pm create_vm: VM.Allocate on /vms/{vmid}
            acl.check(authuser, f"/vms/{new}", ["VM.Allocate"])
            if path.endswith("/lxc") and params.get("unprivileged", "1") in ("0", "false", "no", "off"):
                acl.check(authuser, "/", ["Sys.Modify"])  # API2/LXC.pm:272-273, a privileged CT
        elif re.fullmatch(r"/nodes/[^/]+/storage/[^/]+/content", path):
            acl.check(authuser, f"/storage/{args['storage']}", ["Datastore.Audit"])
        return
    target = f"/vms/{vmid}"
    tail = path.rsplit(f"/{vmid}", 1)[-1]
    if method == "GET":
        acl.check(authuser, target, ["VM.Audit"])  # config, pending, status/current: check VM.Audit
    elif tail.startswith("/status/"):
        acl.check(authuser, target, ["VM.PowerMgmt"])  # API2/LXC/Status.pm, API2/Qemu.pm vm_start & co
    elif tail == "/config":
        keys = [k for k in params if k not in _CONTROL] + [k.lstrip("!") for k in _split(params.get("delete"))]
        kind = "lxc" if "/lxc/" in path else "qemu"
        for key in keys:
            if kind == "lxc":
                if not re.fullmatch(r"dev\d+|hookscript|features", key):  # root-only / feature rules: schema.py
                    acl.check(authuser, target, [acl.ct_key_privilege(key)])
            else:
                priv = acl.vm_key_privilege(key)
                if priv is not None:
                    acl.check(authuser, target, [priv])
    elif method == "DELETE":
        acl.check(authuser, target, ["VM.Allocate"])


# ---- handlers -------------------------------------------------------------------------------


def _nodes(**_: object) -> object:
    st = load_state()
    return [
        {
            "node": st.name,
            "status": "online",
            "type": "node",
            "id": f"node/{st.name}",
            "level": "",
            "maxcpu": 64,
            "maxmem": 540_000_000_000,
            "ssl_fingerprint": "",
        }
    ]


def _node_index(**_: object) -> object:
    return [
        {"name": n}
        for n in (
            "apt",
            "capabilities",
            "disks",
            "hardware",
            "lxc",
            "network",
            "qemu",
            "status",
            "storage",
            "tasks",
            "version",
        )
    ]


def _node_status(**_: object) -> object:
    from gpuhost.lab.node.versions import manager_version

    st = load_state()
    version, build = manager_version()
    return {
        "kversion": f"Linux {st.kernel} #1 SMP PREEMPT_DYNAMIC PMX",
        "pveversion": f"pve-manager/{version}/{build}",
        "current-kernel": {"release": st.kernel, "sysname": "Linux", "machine": "x86_64"},
        "boot-info": {"mode": "efi" if st.boot == "systemd-boot" else "legacy-bios", "secureboot": 0},
        "cpuinfo": {
            "model": "AMD EPYC 9554 64-Core Processor" if st.cpu == "amd" else "INTEL(R) XEON(R) PLATINUM 8592+",
            "cpus": 128,
            "sockets": 2,
        },
    }


def _qemu_list(**_: object) -> object:
    return qemu.list_vms()


def _qemu_create(params: Params, authuser: str, **_: object) -> object:
    vmid = guests.parse_vmid(params.get("vmid", ""))
    options = _options(params)
    from gpuhost.lab.node import formats, schema

    formats.check_qemu_params(options)
    schema.check_vm_modify_perm(authuser, list(options), options, {})
    return tasks.run(guests.nodename(), "qmcreate", str(vmid), authuser, lambda: qemu.create(vmid, options))


def _qemu_index(**_: object) -> object:
    return [{"subdir": s} for s in ("config", "pending", "status", "snapshot", "migrate")]


def _destroy(kind: guests.Kind, task: str, destroy: Callable[[int], None]) -> Callable[..., object]:
    """DELETE /nodes/{node}/{qemu,lxc}/{vmid}: a task (``qmdestroy``/``vzdestroy``) for a guest that exists."""

    def handler(vmid: int, authuser: str, **_: object) -> object:
        guests.load(kind, vmid)
        return tasks.run(guests.nodename(), task, str(vmid), authuser, lambda: destroy(vmid))

    return handler


def _config_get(config: Callable[..., dict[str, object]]) -> Callable[..., object]:
    """GET /nodes/{node}/{qemu,lxc}/{vmid}/config: ``current`` and ``snapshot`` as both APIs take them."""

    def handler(vmid: int, params: Params, **_: object) -> object:
        return config(vmid, current=_bool(params, "current"), snapshot=params.get("snapshot"))

    return handler


_qemu_destroy = _destroy("qemu", "qmdestroy", qemu.destroy)
_qemu_config_get = _config_get(qemu.config)


def _qemu_config_put(vmid: int, params: Params, authuser: str, **_: object) -> object:
    from gpuhost.lab.node import formats

    formats.check_qemu_params(_options(params))
    qemu.update(
        vmid, *_changes(params), authuser=authuser, digest=params.get("digest"), skiplock=_bool(params, "skiplock")
    )
    return None


def _qemu_config_post(vmid: int, params: Params, authuser: str, **_: object) -> object:
    options = _options(params)
    delete, revert = _split(params.get("delete")), _split(params.get("revert"))
    guests.load("qemu", vmid)
    # parameter and permission errors come back at once, like PVE's pre-fork checks
    from gpuhost.lab.node import formats, schema

    for key in options:
        schema.check_key("qemu", key)
    formats.check_qemu_params(options)
    schema.check_vm_modify_perm(
        authuser, list(options) + delete, options, {k: str(v) for k, v in qemu.config(vmid).items()}
    )

    def work() -> list[str]:
        still_pending = qemu.update(vmid, options, delete, revert, authuser=authuser, digest=params.get("digest"))
        return [f"update VM {vmid}: " + " ".join(f"-{k} {v}" for k, v in options.items())] + [
            f"pending until the next cold start: {', '.join(still_pending)}"
        ] * bool(still_pending)

    return tasks.run(guests.nodename(), "qmconfig", str(vmid), authuser, work)


def _qemu_pending(vmid: int, **_: object) -> object:
    return qemu.pending_view(vmid)


def _status_index(**_: object) -> object:
    return [{"subdir": s} for s in ("current", "start", "stop", "shutdown", "reboot")]


def _qemu_status(vmid: int, **_: object) -> object:
    return qemu.status(vmid)


def _qemu_action(action: str) -> Callable[..., object]:
    def run(vmid: int, params: Params, authuser: str, **_: object) -> object:
        guests.load("qemu", vmid)
        if _bool(params, "skiplock") and authuser != "root@pam":
            raise param_error({"skiplock": "Only root may use this option."})

        def work() -> None:
            if action in ("stop", "shutdown", "reboot"):
                (qemu.stop if action == "stop" else qemu.shutdown)(vmid)
            if action in ("start", "reboot"):
                qemu.start(vmid)

        return tasks.run(guests.nodename(), f"qm{action}", str(vmid), authuser, work)

    return run


def _lxc_list(**_: object) -> object:
    return lxc.list_cts()


def _lxc_create(params: Params, authuser: str, **_: object) -> object:
    vmid = guests.parse_vmid(params.get("vmid", ""))
    ostemplate = params.get("ostemplate")
    if not ostemplate:
        raise param_error({"ostemplate": "property is missing and it is not optional"})
    options = {k: v for k, v in params.items() if k not in ("vmid", "ostemplate", "node", "start")}
    from gpuhost.lab.node import schema

    schema.check_ct_modify_perm(authuser, list(options))
    for key in options:
        if key.startswith("lxc."):
            raise param_error(
                {key: "property is not defined in schema and the schema does not allow additional properties"}
            )
    lxc.check_params(
        {
            k: v
            for k, v in options.items()
            if k not in ("storage", "password", "ssh-public-keys", "pool", "unique", "force")
        }
    )

    def work() -> list[str]:
        lines = lxc.create(vmid, ostemplate, dict(options), authuser=authuser)
        if _bool(params, "start"):
            lines += lxc.start(vmid)
        return lines

    return tasks.run(guests.nodename(), "vzcreate", str(vmid), authuser, work)


_lxc_destroy = _destroy("lxc", "vzdestroy", lxc.destroy)
_lxc_config_get = _config_get(lxc.config)


def _lxc_config_put(vmid: int, params: Params, authuser: str, **_: object) -> object:
    lxc.update(vmid, *_changes(params), authuser=authuser, digest=params.get("digest"))
    return None


def _lxc_pending(vmid: int, **_: object) -> object:
    return lxc.pending_view(vmid)


def _lxc_status(vmid: int, **_: object) -> object:
    return lxc.status(vmid)


def _lxc_action(action: str) -> Callable[..., object]:
    def run(vmid: int, authuser: str, **_: object) -> object:
        guests.load("lxc", vmid)
        operation = {"start": lxc.start, "stop": lxc.stop, "shutdown": lxc.shutdown, "reboot": lxc.reboot}[action]

        def work() -> list[str] | None:
            return operation(vmid)

        return tasks.run(guests.nodename(), f"vz{action}", str(vmid), authuser, work)

    return run


def _storage_list(**_: object) -> object:
    st = load_state()
    second = "local-zfs" if st.root_fs == "zfs" else "local-lvm"
    return [
        {"storage": "local", "type": "dir", "content": "iso,vztmpl,backup", "active": 1, "enabled": 1},
        {
            "storage": second,
            "type": "zfspool" if st.root_fs == "zfs" else "lvmthin",
            "content": "images,rootdir",
            "active": 1,
            "enabled": 1,
        },
    ]


def _storage_content(storage: str, params: Params, **_: object) -> object:
    return lxc.storage_content(storage, params.get("content"))


def _task_status(upid: str, **_: object) -> object:
    return tasks.status(upid)


def _task_log(upid: str, params: Params, **_: object) -> object:
    def integer(key: str, default: int) -> int:
        value = params.get(key, str(default))
        if not str(value).isdigit():  # the schema's integer, minimum 0 (API2/Tasks.pm:355-368)
            raise param_error({key: f"type check ('integer') failed - got '{value}'"})
        return int(value)

    return tasks.log(upid, start=integer("start", 0), limit=integer("limit", 50))


def _version_handler(**_: object) -> object:
    return version_info()


_N = r"/nodes/(?P<node>[\w\-.]+)"
_V = r"(?P<vmid>\d+)"
ROUTES: list[tuple[re.Pattern[str], dict[str, Callable[..., object]]]] = [
    (re.compile(r"/version"), {"GET": _version_handler}),
    (re.compile(r"/nodes"), {"GET": _nodes}),
    (re.compile(_N), {"GET": _node_index}),
    (re.compile(_N + r"/status"), {"GET": _node_status}),
    (re.compile(_N + r"/version"), {"GET": _version_handler}),
    (re.compile(_N + r"/qemu"), {"GET": _qemu_list, "POST": _qemu_create}),
    (re.compile(_N + r"/qemu/" + _V), {"GET": _qemu_index, "DELETE": _qemu_destroy}),
    (
        re.compile(_N + r"/qemu/" + _V + r"/config"),
        {"GET": _qemu_config_get, "PUT": _qemu_config_put, "POST": _qemu_config_post},
    ),
    (re.compile(_N + r"/qemu/" + _V + r"/pending"), {"GET": _qemu_pending}),
    (re.compile(_N + r"/qemu/" + _V + r"/status"), {"GET": _status_index}),
    (re.compile(_N + r"/qemu/" + _V + r"/status/current"), {"GET": _qemu_status}),
    *[
        (re.compile(_N + r"/qemu/" + _V + f"/status/{a}"), {"POST": _qemu_action(a)})
        for a in ("start", "stop", "shutdown", "reboot")
    ],
    (re.compile(_N + r"/lxc"), {"GET": _lxc_list, "POST": _lxc_create}),
    (re.compile(_N + r"/lxc/" + _V), {"GET": _qemu_index, "DELETE": _lxc_destroy}),
    (re.compile(_N + r"/lxc/" + _V + r"/config"), {"GET": _lxc_config_get, "PUT": _lxc_config_put}),
    (re.compile(_N + r"/lxc/" + _V + r"/pending"), {"GET": _lxc_pending}),
    (re.compile(_N + r"/lxc/" + _V + r"/status"), {"GET": _status_index}),
    (re.compile(_N + r"/lxc/" + _V + r"/status/current"), {"GET": _lxc_status}),
    *[
        (re.compile(_N + r"/lxc/" + _V + f"/status/{a}"), {"POST": _lxc_action(a)})
        for a in ("start", "stop", "shutdown", "reboot")
    ],
    (re.compile(_N + r"/storage"), {"GET": _storage_list}),
    (re.compile(_N + r"/storage/(?P<storage>[\w\-]+)/content"), {"GET": _storage_content}),
    (re.compile(_N + r"/tasks/(?P<upid>UPID:[^/]+)/status"), {"GET": _task_status}),
    (re.compile(_N + r"/tasks/(?P<upid>UPID:[^/]+)/log"), {"GET": _task_log}),
]
