"""The Proxmox VE API through proxmoxer, with two privilege routes.

- **token route**: HTTPS with the inventory's API token, for ordinary keys;
- **root route**: ``pvesh`` run as root over gpuhost's own SSH connection (host keys verified,
  unlike proxmoxer's ``ssh_paramiko`` backend, which trusts any key), for what PVE reserves to
  ``root@pam``: ``devN`` passthrough, raw ``hostpciN``, ``args``, ``hookscript``, and more.

A call goes the token way when a token is configured and no parameter is root-only; otherwise
as root. If PVE still answers with a root-only refusal, the call is retried as root once.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from proxmoxer import ProxmoxAPI
from proxmoxer.backends.command_base import CommandBaseSession, JsonSimpleSerializer
from proxmoxer.core import ProxmoxResource, ResourceException

from gpuhost.connection.base import Connection
from gpuhost.errors import OperationFailed
from gpuhost.redact import redact

#: Parameters PVE lets only root@pam set (pve-container check_ct_modify_config_perm,
#: qemu-server check_hostpci_perm / 'only root can set args').
_ROOT_ONLY = re.compile(r"^(dev\d+|args|hookscript|hostpci\d+|usb\d+)$")
_ROOT_REFUSAL = re.compile(r"only root can set|only allowed for root@pam|Permission check failed")


def root_only(key: str, value: object = "") -> bool:
    if key.startswith("hostpci") and isinstance(value, str) and value.startswith("mapping="):
        return False
    return bool(_ROOT_ONLY.match(key))


class _PveshSession(CommandBaseSession):  # type: ignore[misc]
    """proxmoxer's command backend, carried by a gpuhost connection (``pvesh`` as root)."""

    def __init__(self, conn: Connection, timeout: float) -> None:
        super().__init__(service="PVE", timeout=int(timeout))
        self.conn = conn

    def _exec(self, cmd: list[str]) -> tuple[str, str, int]:
        result = self.conn.run(shlex.join(cmd), check=False, timeout=self.timeout)
        return result.stdout, result.stderr, result.exit_code


@dataclass(frozen=True)
class TokenRoute:
    """The HTTPS route: the node's API URL and token (the secret already read, and registered for redaction)."""

    url: str
    token_id: str
    token_secret: str
    ca_file: str | None = None
    verify_tls: bool = True


def _token_client(route: TokenRoute | None, timeout: float) -> ProxmoxResource | None:
    if route is None:
        return None
    user, _, token_name = route.token_id.partition("!")
    url = urlparse(route.url)
    verify: bool | str = route.ca_file if route.ca_file else route.verify_tls
    return ProxmoxAPI(
        url.hostname,
        port=url.port or 8006,
        user=user,
        token_name=token_name,
        token_value=route.token_secret,
        verify_ssl=verify,
        timeout=int(timeout),
        backend="https",
    )


class PveApi:
    """One node's API; ``path`` is relative to ``/api2/json`` (e.g. ``nodes/pve1/lxc``)."""

    def __init__(self, conn: Connection, token: TokenRoute | None = None, *, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._root = ProxmoxResource(
            base_url="", session=_PveshSession(conn, timeout), serializer=JsonSimpleSerializer()
        )
        self._token = _token_client(token, timeout)

    @property
    def has_token(self) -> bool:
        return self._token is not None

    def route_for(self, params: Mapping[str, Any]) -> str:
        if self._token is None or any(root_only(k, v) for k, v in params.items()):
            return "root"
        return "token"

    def call(self, method: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
        params = dict(params or {})
        route = self.route_for(params)
        try:
            return self._request(route, method, path, params)
        except ResourceException as exc:
            if route == "token" and _ROOT_REFUSAL.search(str(exc)):
                return self._request("root", method, path, params)
            raise OperationFailed(
                f"PVE API {method.upper()} /{path} ({route}): {redact(str(exc)).strip()[-400:]}"
            ) from None

    def _request(self, route: str, method: str, path: str, params: dict[str, Any]) -> Any:
        client = self._token if route == "token" else self._root
        assert client is not None
        resource = client(path.strip("/"))
        return getattr(resource, method.lower())(**params)

    def wait_task(self, upid: Any, timeout: float = 900.0) -> None:
        """Block until the task behind ``upid`` ends; fail with its exit status otherwise."""
        if not isinstance(upid, str) or not upid.startswith("UPID:"):
            return  # synchronous call, nothing to wait for
        node = upid.split(":")[1]
        deadline = time.monotonic() + timeout
        while True:
            status = self.call("get", f"nodes/{node}/tasks/{upid}/status")
            if status.get("status") == "stopped":
                if status.get("exitstatus") != "OK":
                    log = self.call("get", f"nodes/{node}/tasks/{upid}/log") or []
                    tail = " | ".join(str(line.get("t", "")) for line in log[-5:])
                    raise OperationFailed(f"PVE task {upid} failed: {status.get('exitstatus')}: {tail}")
                return
            if time.monotonic() > deadline:
                raise OperationFailed(f"PVE task {upid} still running after {timeout:.0f} s")
            time.sleep(0.2)
