"""The Proxmox VE API, with two privilege routes.

- **token route**: HTTPS through proxmoxer with the inventory's API token, for ordinary keys;
- **root route**: ``pvesh`` run as root over gpuhost's own SSH connection (host keys verified,
  unlike proxmoxer's ``ssh_paramiko`` backend, which trusts any key), for what PVE reserves to
  ``root@pam``: ``devN`` passthrough, raw ``hostpciN``, ``args``, ``hookscript``, and more.

A call goes the token way when a token is configured and no parameter is root-only; otherwise
as root. If PVE answers with one of its root-only refusals, the call is retried as root once; any
other permission refusal (a token missing an ACL) is reported as such, never escalated.

The root route is not proxmoxer's command backend: in the CLI, pve-common's
``RESTEnvironment::fork_worker`` runs a task synchronously (``$sync`` when ``type eq 'cli'``,
RESTEnvironment.pm:529) and its tee prints the task log on stdout before pvesh prints the UPID
(RESTEnvironment.pm:442-487); the task's end goes to stderr (``TASK ERROR`` text, "Task finished with
N warning(s)!", 490-498), and pvesh still exits 0 (pve-manager PVE/CLI/pvesh.pm ``call_api_method``
returns the UPID). proxmoxer reads that as ``{"errors": …}`` or as a 500 from any stderr line
(proxmoxer issue #117). Here the exit code decides whether the call was refused, the JSON is the
last line of stdout, stderr is kept as PVE's warnings, and a task's outcome is read back from its
status (``tasks/UPID/status``) as on the token route.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from proxmoxer import ProxmoxAPI
from proxmoxer.core import ProxmoxResource, ResourceException
from requests.adapters import HTTPAdapter

from gpuhost.connection.base import Connection
from gpuhost.errors import OperationFailed
from gpuhost.redact import redact

#: Parameters PVE lets only root@pam set: pve-container ``PVE::LXC::check_ct_modify_config_perm``
#: (LXC.pm:1655-1740: ``devN``, ``hookscript``); qemu-server ``PVE::API2::Qemu`` ``check_hostpci_perm``
#: / ``check_usb_perm`` (Qemu.pm:875-925: non-mapped ``hostpciN``/``usbN``) and ``check_vm_modify_config_perm``
#: (Qemu.pm:1034-1037: every key outside its option lists, e.g. ``args``, ``affinity``, ``hugepages``,
#: ``keephugepages``, ``ivshmem``: "only root can set '$opt' config").
_ROOT_ONLY = re.compile(r"^(dev\d+|args|hookscript|hostpci\d+|usb\d+|affinity|hugepages|keephugepages|ivshmem)$")
#: PVE's refusals of a key reserved to root@pam (the texts above, plus Qemu.pm:934's
#: "only root@pam can set 'romfile' option" and LXC.pm:1669-1738's "… is only allowed for root@pam",
#: e.g. ``features`` on a privileged container). Retried as root; nothing else is.
_ROOT_REFUSAL = re.compile(r"only root can (set|delete|modify)|only allowed for root@pam|only root@pam can set")
#: PVE::RPCEnvironment::check / check_vm_perm: ``raise_perm_exc("$path, $privs")`` → 403
#: "Permission check failed (/vms/200, VM.Config.Memory)".
_ACL_REFUSAL = re.compile(r"Permission check failed \((/[^,)]*), ([\w.|, ]+)\)")
#: pve-common UPID.pm ``status_is_error``: ``OK`` and ``WARNINGS: N`` are success, anything else failed.
_TASK_SUCCESS = re.compile(r"^(OK|WARNINGS: \d+)$")
_UPID = re.compile(r"^UPID:[\w.-]+:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}:\w+:[^:]*:[^:]+:")


def root_only(key: str, value: object = "") -> bool:
    if key.startswith("hostpci") and isinstance(value, str) and value.startswith("mapping="):
        return False
    return bool(_ROOT_ONLY.match(key))


def task_succeeded(exitstatus: object) -> bool:
    """pve-common ``PVE::UPID::status_is_error`` (UPID.pm:88-91), negated."""
    return isinstance(exitstatus, str) and bool(_TASK_SUCCESS.match(exitstatus))


def is_upid(value: object) -> bool:
    return isinstance(value, str) and bool(_UPID.match(value))


class PveshRefused(Exception):
    """pvesh exited non-zero: PVE refused the call (its CLI prints the error on stderr)."""


@dataclass
class _PveshRoute:
    """``pvesh`` as root over the node's connection; ``warnings`` collects what PVE printed on stderr."""

    conn: Connection
    timeout: float
    task_timeout: float
    warnings: list[str] = field(default_factory=list)

    def request(self, method: str, path: str, params: Mapping[str, Any]) -> Any:
        verb = {"get": "get", "put": "set", "post": "create", "delete": "delete"}[method.lower()]
        argv = ["pvesh", verb, "/" + path.strip("/"), "--output-format", "json"]
        for key, value in params.items():
            argv.append(f"--{key}={value}")  # one word: a value may begin with '-' (args: -set …)
        # a task runs inside the pvesh process: give it the task's time, not a plain call's
        limit = self.task_timeout if verb in ("create", "delete") else self.timeout
        result = self.conn.run(shlex.join(argv), check=False, timeout=limit)
        stderr = [line for line in result.stderr.splitlines() if line.strip()]
        if result.timed_out:
            raise OperationFailed(
                f"PVE API {method.upper()} /{path} (root): pvesh still running after {limit:.0f} s; "
                "the task may still be running on the node (see its task log)"
            )
        if result.exit_code != 0:
            raise PveshRefused("\n".join(stderr) or f"pvesh exited {result.exit_code}")
        self.warnings.extend(stderr)
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        if not lines:
            return None
        try:
            return json.loads(lines[-1])  # pvesh prints the result after a synchronous task's log
        except ValueError:
            raise OperationFailed(
                f"PVE API {method.upper()} /{path} (root): pvesh printed no JSON result: {redact(lines[-1])[:200]}"
            ) from None


@dataclass(frozen=True)
class TokenRoute:
    """The HTTPS route: the node's API URL and token (the secret already read, and registered for redaction)."""

    url: str
    token_id: str
    token_secret: str
    ca_file: str | None = None
    verify_tls: bool = True
    #: SHA-256 fingerprint of the API's certificate, pinned (checked on every connection by urllib3)
    fingerprint: str | None = None


def _token_client(route: TokenRoute | None, timeout: float) -> ProxmoxResource | None:
    if route is None:
        return None
    user, _, token_name = route.token_id.partition("!")
    url = urlparse(route.url)
    verify: bool | str = route.ca_file if route.ca_file else route.verify_tls
    if route.fingerprint:
        verify = False  # the chain is not checked: the pinned fingerprint is (urllib3 assert_fingerprint)
    api = ProxmoxAPI(
        url.hostname,
        port=url.port or 8006,
        user=user,
        token_name=token_name,
        token_value=route.token_secret,
        verify_ssl=verify,
        timeout=int(timeout),
        backend="https",
    )
    if route.fingerprint:
        api._store["session"].mount(f"https://{url.hostname}:{url.port or 8006}", _Pinned(route.fingerprint))
    return api


class _Pinned(HTTPAdapter):
    """Every connection must present the certificate with this SHA-256 fingerprint (urllib3's
    ``assert_fingerprint``: a mismatch is an SSLError before any request is sent)."""

    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        import warnings

        from urllib3.exceptions import InsecureRequestWarning

        warnings.simplefilter("ignore", InsecureRequestWarning)  # the chain is replaced by the pin
        kwargs["assert_fingerprint"] = self.fingerprint
        super().init_poolmanager(*args, **kwargs)


@dataclass(frozen=True)
class TaskOutcome:
    """A finished PVE task that succeeded: its exit status (``OK`` or ``WARNINGS: N``) and its warnings."""

    upid: str
    exitstatus: str
    warnings: tuple[str, ...] = ()


def _acl_hint(message: str) -> str:
    m = _ACL_REFUSAL.search(message)
    if m is None:
        return ""
    return (
        f"; the API token lacks {m.group(2)} on {m.group(1)}: grant it "
        f"(pveum acl modify {m.group(1)} --tokens USER@REALM!NAME --roles ROLE) — gpuhost does not fall back "
        "to root for keys PVE does not reserve to root@pam"
    )


class ApiCertificateError(Exception):
    """The API's TLS certificate could not be verified (the message says which and why)."""


def probe_version(route: TokenRoute, timeout: float = 10.0) -> str | None:
    """``GET /version`` over the token route, before any change: the release on success; raises
    :class:`ApiCertificateError` when TLS verification fails; None when the API cannot be reached at all
    (the run reports that where it needs the API)."""
    import requests

    try:
        answer = _token_client(route, timeout)("version").get()  # type: ignore[misc]
    except requests.exceptions.SSLError as exc:
        raise ApiCertificateError(str(exc)) from None
    except (requests.exceptions.RequestException, ResourceException):
        return None
    return str(answer.get("version")) if isinstance(answer, dict) else None


class PveApi:
    """One node's API; ``path`` is relative to ``/api2/json`` (e.g. ``nodes/pve1/lxc``)."""

    def __init__(
        self, conn: Connection, token: TokenRoute | None = None, *, timeout: float = 60.0, task_timeout: float = 900.0
    ) -> None:
        self.timeout = timeout
        self._root = _PveshRoute(conn, timeout, task_timeout)
        self._token = _token_client(token, timeout)

    @property
    def has_token(self) -> bool:
        return self._token is not None

    def route_for(self, params: Mapping[str, Any]) -> str:
        if self._token is None or any(root_only(k, v) for k, v in params.items()):
            return "root"
        return "token"

    def take_warnings(self) -> list[str]:
        """What PVE printed on stderr on the root route since the last call of this (its warnings)."""
        out, self._root.warnings[:] = list(self._root.warnings), []
        return out

    def call(self, method: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
        params = dict(params or {})
        route = self.route_for(params)
        while True:
            try:
                return self._request(route, method, path, params)
            except (ResourceException, PveshRefused) as exc:
                text = str(exc)
                if route == "token" and _ROOT_REFUSAL.search(text):
                    route = "root"  # a key PVE reserves to root@pam: once more, as root
                    continue
                raise OperationFailed(
                    f"PVE API {method.upper()} /{path} ({route}): {redact(text).strip()[-400:]}{_acl_hint(text)}"
                ) from None

    def _request(self, route: str, method: str, path: str, params: dict[str, Any]) -> Any:
        if route == "root":
            return self._root.request(method, path, params)
        assert self._token is not None
        resource = self._token(path.strip("/"))
        return getattr(resource, method.lower())(**params)

    def wait_task(self, upid: Any, timeout: float = 900.0) -> TaskOutcome | None:
        """Block until the task behind ``upid`` ends; fail with its exit status unless PVE counts it a
        success (``OK`` or ``WARNINGS: N``, pve-common UPID.pm ``status_is_error``). A synchronous call
        (no UPID) has nothing to wait for: None."""
        if not is_upid(upid):
            return None
        node = upid.split(":")[1]
        deadline = time.monotonic() + timeout
        while True:
            status = self.call("get", f"nodes/{node}/tasks/{upid}/status")
            if status.get("status") == "stopped":
                exitstatus = str(status.get("exitstatus", ""))
                if not task_succeeded(exitstatus):
                    raise OperationFailed(f"PVE task {upid} failed: {exitstatus}: {self._log_tail(node, upid)}")
                warnings: tuple[str, ...] = ()
                if exitstatus != "OK":
                    warnings = tuple(
                        line.removeprefix("WARN: ") for line in self._log(node, upid) if line.startswith("WARN: ")
                    )
                return TaskOutcome(upid, exitstatus, warnings)
            if time.monotonic() > deadline:
                raise OperationFailed(f"PVE task {upid} still running after {timeout:.0f} s")
            time.sleep(0.2)

    def _log(self, node: str, upid: str) -> list[str]:
        """The whole task log: the log API returns 50 lines unless asked (pve-manager API2/Tasks.pm
        ``read_task_log``, ``limit`` default 50); ``limit=0`` reads to the end (pve-common Tools.pm
        ``dump_logfile_by_filehandle``, ``read_until_end``, since f0c1b0c, PVE 7.3)."""
        log = self.call("get", f"nodes/{node}/tasks/{upid}/log", {"start": 0, "limit": 0}) or []
        return [str(line.get("t", "")) for line in log if isinstance(line, dict)]

    def _log_tail(self, node: str, upid: str) -> str:
        lines = [line for line in self._log(node, upid) if line.strip() and not line.startswith("TASK ")]
        return " | ".join(lines[-5:])
