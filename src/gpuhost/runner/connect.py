"""From an inventory entry to a live connection (and the node's PVE API routes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from gpuhost.connection.base import Connection
from gpuhost.core.facts import Fact
from gpuhost.errors import ConnectionFailed
from gpuhost.inventory.models import NodeSpec, VMSpec
from gpuhost.secrets import read_secret

if TYPE_CHECKING:
    from gpuhost.connection.settings import SSHSettings
    from gpuhost.core.result import KeptAnswer
    from gpuhost.inventory.loader import Inventory
    from gpuhost.pve.api import PveApi, TokenRoute

T = TypeVar("T")


API_ONLY = (
    "only an API token is configured (connection: api), and provisioning needs root over SSH: PVE lets "
    "only root@pam set device passthrough ('configuring device passthrough is only allowed for "
    "root@pam'), raw lxc.* keys have no API at all, and the kernel command line, modules and driver "
    "live outside PVE's API. Fix: give gpuhost SSH as root to this node (ssh: {user: root, key_file: …}"
    " and remove connection: api)"
)


def open_connection(node: NodeSpec) -> Connection:
    """A live connection to ``node`` as its inventory entry describes."""
    if node.connection == "local":
        from gpuhost.connection.local import LocalConnection

        return LocalConnection(node.name)
    if node.connection == "api":
        raise ConnectionFailed(node.name, API_ONLY)
    from gpuhost.connection.ssh import SSHConnection

    return SSHConnection(node.name, ssh_settings(node))


def kept_reader(node: NodeSpec) -> Callable[[str], KeptAnswer] | None:
    """How a read-only command is sent to ``node``'s kept connection (``ssh.persist``,
    :mod:`gpuhost.connection.persist`): its exit status, output and error output, or None when the keeper holds
    no connection to the node (the run then reads over its own). None when the node keeps none."""
    if not persists(node):
        return None

    def via(command: str) -> KeptAnswer:
        import time

        from gpuhost.connection import persist

        start = time.monotonic()
        answer = persist.read(node, command, node.ssh.command_timeout)
        log_kept_read(node, command, answer, start)
        return answer

    return via


def persists(node: NodeSpec) -> bool:
    """Whether ``node``'s connection is kept between runs (``ssh.persist``, over SSH)."""
    return node.connection == "ssh" and bool(node.ssh.persist)


def log_kept_read(node: NodeSpec, command: str, answer: KeptAnswer, start: float) -> None:
    """``--log``'s line for a read the keeper answered (sent at ``start``, monotonic); nothing for one it did not."""
    import logging
    import time

    from gpuhost.connection.base import remote_log

    if answer is not None and remote_log.isEnabledFor(logging.DEBUG):
        extra = {"host": node.name, "command": command, "exit_code": answer[0]}
        remote_log.debug("%s", command, extra={**extra, "duration": time.monotonic() - start})


def keep_connections(nodes: list[NodeSpec]) -> None:
    """Ask this user's keeper to hold a connection to each of ``nodes`` that sets ``ssh.persist`` (and is reached
    over SSH) for the next run: one it holds already is kept ``persist`` seconds from now, the others are sent
    their settings; a node whose settings cannot be read is left out (its run said why)."""
    from gpuhost.connection import persist
    from gpuhost.errors import GpuhostError

    persisting = [n for n in nodes if persists(n)]
    if not persisting:
        return
    wanted: list[tuple[NodeSpec, SSHSettings]] = []
    for node, held in zip(persisting, persist.touch(persisting), strict=True):
        if held:
            continue
        try:
            wanted.append((node, ssh_settings(node)))
        except GpuhostError:
            continue
    if wanted:
        persist.keep(wanted)


def ssh_settings(node: NodeSpec) -> SSHSettings:
    """The node's SSH settings: what its inventory entry writes, then ``~/.ssh/config`` for its address
    (HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand), then the defaults."""
    from gpuhost.connection.settings import SSHSettings
    from gpuhost.connection.sshconfig import lookup, parse_jump

    s = node.ssh
    _usable_keys(node)
    written = s.model_fields_set
    found = lookup(s.config_file, node.address, node.name)
    password = read_secret(f"{node.name}: ssh password", env=s.password_env, file=s.password_file)
    jump: SSHSettings | None = None
    if s.jump is not None:
        j = s.jump
        jump = SSHSettings(
            address=j.address,
            user=j.user,
            port=j.port,
            key_file=j.key_file or s.key_file,
            known_hosts_file=j.known_hosts_file or s.known_hosts_file,
            host_key_policy=s.host_key_policy,
            connect_timeout=s.connect_timeout,
            allow_agent=s.use_agent,
            look_for_keys=not (j.key_file or s.key_file),
        )
    elif found.proxy_jump and not found.proxy_command:
        user, host, port = parse_jump(found.proxy_jump)
        hop = lookup(s.config_file, host, node.name)
        jump = SSHSettings(
            address=hop.hostname or host,
            user=user or hop.user or "root",
            port=port or hop.port or 22,
            key_file=s.key_file,
            key_files=hop.identity_files,
            known_hosts_file=s.known_hosts_file,
            host_key_policy=s.host_key_policy,
            connect_timeout=s.connect_timeout,
            allow_agent=s.use_agent,
            look_for_keys=not (s.key_file or hop.identity_files),
            proxy_command=hop.proxy_command,
        )
    key_file = s.key_file
    return SSHSettings(
        address=found.hostname or node.address,
        user=s.user if "user" in written or not found.user else found.user,
        port=s.port if "port" in written or not found.port else found.port,
        key_file=key_file,
        key_files=found.identity_files,
        password=password,
        known_hosts_file=s.known_hosts_file,
        host_key_policy=s.host_key_policy,
        connect_timeout=s.connect_timeout,
        allow_agent=s.use_agent,
        look_for_keys=not (key_file or found.identity_files or password),
        proxy_command=None if s.jump is not None else found.proxy_command,
        jump=jump,
        become=s.become,
        keepalive=s.keepalive,
        keepalive_count=s.keepalive_count,
        command_timeout=s.command_timeout,
    )


def _usable_keys(node: NodeSpec) -> None:
    """The node's key files can be used (the commands that do not check the inventory's keys before connecting,
    :func:`gpuhost.inventory.key_files.check_key_files`, learn it here, still before this node's connection)."""
    from gpuhost.errors import InventoryError
    from gpuhost.inventory.key_files import key_problem

    for key, field in (
        (node.ssh.key_file, "ssh.key_file"),
        (node.ssh.jump and node.ssh.jump.key_file, "ssh.jump.key_file"),
    ):
        problem = key_problem(key) if key else None
        if problem is not None:
            raise InventoryError(f"{problem}: fix the key or the inventory", field=f"nodes.{node.name}.{field}")


def open_vm_connection(name: str, vm: VMSpec) -> Connection:
    """SSH into a VM guest at its inventory address (host keys checked as for nodes)."""
    from gpuhost.connection.ssh import SSHConnection, SSHSettings

    assert vm.address is not None
    s = vm.ssh
    wait_for_ssh(name, vm.address, s.port, vm.boot_timeout)
    password = read_secret(f"{name}: ssh password", env=s.password_env, file=s.password_file)
    return SSHConnection(
        name,
        SSHSettings(
            address=vm.address,
            user=s.user,
            port=s.port,
            key_file=s.key_file,
            password=password,
            known_hosts_file=s.known_hosts_file,
            host_key_policy=s.host_key_policy,
            connect_timeout=s.connect_timeout,
        ),
    )


def wait_for_ssh(name: str, address: str, port: int, timeout: float) -> None:
    """A VM that has just started needs a while to boot: wait until its SSH server greets."""
    import socket
    import time

    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            with socket.create_connection((address, port), timeout=2) as sock:
                sock.settimeout(5)
                if sock.recv(4) == b"SSH-":
                    return
                last = "no SSH banner"
        except OSError as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            raise ConnectionFailed(
                name, f"{address}:{port}: the guest's SSH did not answer in {timeout:.0f} s ({last})"
            )
        time.sleep(0.25)


def token_route(node: NodeSpec) -> TokenRoute | None:
    api = node.api
    if api is None or not api.token_id:
        return None
    secret = read_secret(f"{node.name}: API token", env=api.token_secret_env, file=api.token_secret_file)
    if secret is None:
        return None
    from gpuhost.pve.api import TokenRoute

    return TokenRoute(
        url=api.url,
        token_id=api.token_id,
        token_secret=secret,
        ca_file=api.ca_file,
        verify_tls=api.verify_tls,
        fingerprint=api.fingerprint,
    )


def probe_api_certificates(inventory: Inventory, hosts: list[str]) -> None:
    """``GET /version`` on each host's API token route before any change (``--check`` too): a certificate
    that cannot be verified is a configuration error (exit 2) naming the fix, not a failure after the
    host was already half provisioned. PVE's own CA signs pveproxy's certificate
    (``/etc/pve/pve-root-ca.pem``, pve-cluster's ``PVE::CertHelpers``/``pvecm updatecerts``)."""
    if not any(inventory.nodes[h].api is not None for h in hosts):
        return  # nothing to ask (and the API client, requests with it, is not imported: ~50 ms of a run)
    from concurrent.futures import ThreadPoolExecutor

    from gpuhost import yamlfile
    from gpuhost.errors import InventoryError
    from gpuhost.pve.api import ApiCertificateError, probe_version

    def probe(host: str) -> ApiCertificateError | None:
        node = inventory.nodes[host]
        route = token_route(node)
        if route is None or node.api is None or not node.api.verify_tls:
            return None
        try:
            probe_version(route)
        except ApiCertificateError as exc:
            return exc
        return None

    # every host at once (a TLS handshake each, over a WAN for a remote fleet), the first failure in host order
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        found = list(pool.map(probe, hosts))
    for host, exc in zip(hosts, found, strict=True):
        node = inventory.nodes[host]
        if exc is not None and node.api is not None:  # probe() returns an error only for a host with an API
            field = "ca_file" if node.api.ca_file else "fingerprint" if node.api.fingerprint else "url"
            hint = (
                f"the CA in api.ca_file ({node.api.ca_file}) did not sign it"
                if node.api.ca_file
                else f"its fingerprint is not api.fingerprint ({node.api.fingerprint})"
                if node.api.fingerprint
                else "no api.ca_file is set, so the system's CAs were used"
            )
            raise InventoryError(
                f"{host}: the PVE API at {node.api.url} presented a certificate that could not be verified "
                f"({hint}; {_ssl_reason(str(exc))}). Nothing was changed. Fix: copy the node's "
                f"/etc/pve/pve-root-ca.pem next to the inventory and set nodes.{host}.api.ca_file to it "
                f"(scp root@{node.address}:/etc/pve/pve-root-ca.pem .), or pin the certificate: set "
                f"nodes.{host}.api.fingerprint to the SHA-256 fingerprint 'pvenode cert info' prints on the node",
                file=str(inventory.path),
                line=yamlfile.line_of(inventory.document, ["nodes", host, "api", field]),
                field=f"nodes.{host}.api.{field}",
            ) from None


def _ssl_reason(text: str) -> str:
    import re

    m = re.search(r"certificate verify failed: ([^(')\]]+)", text)
    return f"certificate verify failed: {m.group(1).strip()}" if m else "TLS verification failed"


def read_fact(conn: Connection, fact: Fact[T], *args: Any) -> T:
    """One fact read through a connection, outside a run (``gpuhost facts``, ``gpuhost verify``)."""
    return fact.parse(conn.run(fact.command(*args), check=False), *args)


def pve_api(node: NodeSpec, conn: Connection) -> PveApi:
    from gpuhost.pve.api import PveApi

    return PveApi(conn, token_route(node))


def _secret_reader(label: str, env: str | None, file: str | None) -> Callable[[], object]:
    return lambda: read_secret(label, env=env, file=file)


def secret_fields(node: NodeSpec) -> list[tuple[str, Callable[[], object]]]:
    """Each secret the node's entry names, as (inventory field, reader): read to check set, 0600, UTF-8, not empty."""
    out: list[tuple[str, Callable[[], object]]] = []
    s, api = node.ssh, node.api
    if s.password_env or s.password_file:
        key = "password_env" if s.password_env else "password_file"
        out.append(
            (f"ssh.{key}", lambda: read_secret(f"{node.name}: ssh password", env=s.password_env, file=s.password_file))
        )
    if api is not None and (api.token_secret_env or api.token_secret_file):
        key = "token_secret_env" if api.token_secret_env else "token_secret_file"
        out.append((f"api.{key}", lambda: token_route(node)))
    for ctid, ct in node.containers.items():
        serve = ct.serve
        if serve is None:
            continue
        for what, env, file in (
            ("api_key", serve.api_key_env, serve.api_key_file),
            ("hf_token", serve.hf_token_env, serve.hf_token_file),
        ):
            if env or file:
                fld = f"containers.{ctid}.serve.{what}_{'env' if env else 'file'}"
                label = f"{node.name}: CT {ctid} serve {what.replace('_', ' ')}"
                out.append((fld, _secret_reader(label, env, file)))
    return out
