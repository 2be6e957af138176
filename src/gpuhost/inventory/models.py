"""The inventory: Proxmox nodes, their guests, groups and variables.

Secrets (API token secrets, SSH passwords) are never written inline: the inventory names
an environment variable (``*_env``) or a file (``*_file``) that holds them.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

_INLINE_SECRETS = {
    "password": "password_env or password_file",
    "token_secret": "token_secret_env or token_secret_file",
    "token": "token_id plus token_secret_env or token_secret_file",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, instead in _INLINE_SECRETS.items():
                if key in data and key not in cls.model_fields:
                    raise ValueError(f"'{key}' must not be written in the inventory; use {instead}")
        return data


#: The name of an environment variable. A value that is not a name (a secret pasted into the field) is
#: refused without being echoed.
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class JumpHost(_Model):
    """A bastion the node is reached through (OpenSSH's ``ProxyJump``); its host key is checked
    against the node's ``known_hosts_file`` unless it names its own."""

    address: str
    user: str = "root"
    port: int = Field(22, ge=1, le=65535)
    key_file: str | None = None
    known_hosts_file: str | None = None


class SSHConfig(_Model):
    """How to reach a node by SSH. A field not written here is taken from ``~/.ssh/config``
    (``config_file``) for the node's address, then from the defaults below."""

    user: str = "root"
    port: int = Field(22, ge=1, le=65535)
    key_file: str | None = None
    known_hosts_file: str = "~/.ssh/known_hosts"
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    password_env: EnvName | None = None
    password_file: str | None = None
    connect_timeout: float = Field(10.0, gt=0)
    #: OpenSSH client configuration read for HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand
    #: (``none``: read none)
    config_file: str = "~/.ssh/config"
    jump: JumpHost | None = None
    #: keys offered by a running ssh-agent (``SSH_AUTH_SOCK``)
    use_agent: bool = True
    #: run every command as root through ``sudo -n`` (a non-root user with passwordless sudo)
    become: bool = False


class APIConfig(_Model):
    url: str
    token_id: str | None = None
    token_secret_env: EnvName | None = None
    token_secret_file: str | None = None
    ca_file: str | None = None
    verify_tls: bool = True

    @field_validator("url")
    @classmethod
    def _https(cls, v: str) -> str:
        if not v.startswith("https://"):
            raise ValueError("must start with https://")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _one_secret_source(self) -> APIConfig:
        if self.token_secret_env and self.token_secret_file:
            raise ValueError("give token_secret_env or token_secret_file, not both")
        if (self.token_secret_env or self.token_secret_file) and not self.token_id:
            raise ValueError("a token secret needs token_id (user@realm!name)")
        if self.token_id and "!" not in self.token_id:
            raise ValueError("token_id must look like user@realm!tokenname")
        return self


#: A PVE storage id (``local``, ``local-lvm``, ``tank_ssd``): PVE's ``pve-storage-id`` format.
StorageId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9\-_.]*[a-z0-9]$")]

_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
_VOLID = re.compile(r"^[a-z][a-z0-9\-_.]*[a-z0-9]:vztmpl/[A-Za-z0-9][A-Za-z0-9_.+-]*\.tar\.(gz|xz|zst)$")
_ROOTFS = re.compile(
    r"^[a-z][a-z0-9\-_.]*[a-z0-9]:(\d+(\.\d+)?|[A-Za-z0-9][A-Za-z0-9_./-]*)"
    r"(,[a-z_]+=[A-Za-z0-9_.:/+-]+)*$"
)
_NET_KEYS = {
    "name",
    "bridge",
    "hwaddr",
    "ip",
    "ip6",
    "gw",
    "gw6",
    "firewall",
    "tag",
    "trunks",
    "mtu",
    "rate",
    "type",
    "link_down",
}
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.:/;+-]+$")


class ContainerSpec(_Model):
    """An LXC guest on a node. Values PVE would refuse are refused here, before any host is touched."""

    hostname: str | None = Field(None, description="DNS name of the container (RFC 1123); default gpuCTID")
    gpus: Literal["all"] | list[int] = Field("all", description="the node's GPU indices to pass through, or all")
    template: str | None = Field(
        None,
        description="volid of the OS template (STORAGE:vztmpl/FILE.tar.zst); "
        "default: the newest Debian 12 template on lxc_storage",
    )
    cores: int = Field(8, ge=1, le=8192)
    memory: int = Field(65536, ge=64, description="MiB")
    swap: int = Field(0, ge=0, description="MiB")
    rootfs: str = Field("local-lvm:64", description="STORAGE:SIZE_GiB or an existing volume, PVE's rootfs syntax")
    net0: str | None = Field(None, description="PVE net0 property string, e.g. name=eth0,bridge=vmbr0,ip=dhcp")
    unprivileged: bool = False
    features: str | None = Field(None, description="PVE features string, e.g. nesting=1")
    onboot: bool = True

    @field_validator("hostname")
    @classmethod
    def _hostname(cls, v: str | None) -> str | None:
        if v is not None and not _HOSTNAME.match(v):
            raise ValueError("invalid format - value does not look like a valid DNS name (RFC 1123)")
        return v

    @field_validator("template")
    @classmethod
    def _template(cls, v: str | None) -> str | None:
        if v is not None and (".." in v or not _VOLID.match(v)):
            raise ValueError("not a template volume id such as local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst")
        return v

    @field_validator("rootfs")
    @classmethod
    def _rootfs(cls, v: str) -> str:
        if ".." in v or not _ROOTFS.match(v):
            raise ValueError("not PVE rootfs syntax (STORAGE:SIZE or STORAGE:VOLUME[,option=value…])")
        return v

    @field_validator("net0")
    @classmethod
    def _net0(cls, v: str | None) -> str | None:
        if v is None:
            return v
        for part in v.split(","):
            key, sep, value = part.partition("=")
            if not sep or key not in _NET_KEYS or not _SAFE_VALUE.match(value):
                raise ValueError(
                    f"'{part}' is not a net0 property (key=value with keys {', '.join(sorted(_NET_KEYS))})"
                )
        return v

    @field_validator("features")
    @classmethod
    def _features(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[a-z_]+=[A-Za-z0-9;]+(,[a-z_]+=[A-Za-z0-9;]+)*", v):
            raise ValueError("not a PVE features string such as nesting=1,keyctl=1")
        return v


class NodeSpec(_Model):
    """A Proxmox VE node (or any Linux host gpuhost manages)."""

    name: str = ""
    address: str
    #: ``api``: only the PVE HTTPS API (a token) is available for this node
    connection: Literal["ssh", "local", "api"] = "ssh"
    ssh: SSHConfig = Field(default_factory=lambda: SSHConfig.model_validate({}))
    api: APIConfig | None = None
    vars: dict[str, Any] = Field(default_factory=dict)
    groups: tuple[str, ...] = ()
    containers: dict[int, ContainerSpec] = Field(default_factory=dict)
    #: the operator's standing consent for this node (the command-line flags give it per run);
    #: never taken from playbook, role or -e variables
    allow_reboot: bool = Field(False, description="gpuhost may reboot this node without --allow-reboot")
    allow_restart: bool = Field(False, description="gpuhost may restart this node's guests without --allow-restart")

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("must not be empty")
        try:
            ipaddress.ip_address(v)
        except ValueError:
            if not all(part and part.replace("-", "").isalnum() for part in v.split(".")):
                raise ValueError(f"'{v}' is neither an IP address nor a host name") from None
        return v

    @model_validator(mode="after")
    def _api_needs_api(self) -> NodeSpec:
        if self.connection == "api" and self.api is None:
            raise ValueError("connection: api needs an 'api' section (url, token_id, token_secret_env/_file)")
        return self

    @field_validator("containers")
    @classmethod
    def _guest_ids(cls, v: dict[int, Any]) -> dict[int, Any]:
        for gid in v:
            if not 100 <= gid <= 999_999_999:
                raise ValueError(f"guest id {gid} is outside PVE's range 100..999999999")
        return v


class GroupSpec(_Model):
    nodes: list[str] = Field(default_factory=list)
    vars: dict[str, Any] = Field(default_factory=dict)
    #: ``ssh`` fields for every node of the group that does not write them itself (e.g. a ``jump`` host)
    ssh_defaults: SSHConfig | None = None


class InventoryFile(_Model):
    """The document as written."""

    vars: dict[str, Any] = Field(default_factory=dict)
    nodes: dict[str, NodeSpec]
    groups: dict[str, GroupSpec] = Field(default_factory=dict)

    @field_validator("nodes")
    @classmethod
    def _some_nodes(cls, v: dict[str, NodeSpec]) -> dict[str, NodeSpec]:
        if not v:
            raise ValueError("at least one node is needed")
        return v
