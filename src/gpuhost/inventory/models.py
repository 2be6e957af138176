"""The inventory: Proxmox nodes, their guests, groups and variables.

Secrets (API token secrets, SSH passwords) are never written inline: the inventory names
an environment variable (``*_env``) or a file (``*_file``) that holds them.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_INLINE_SECRETS = {"password": "password_env or password_file",
                   "token_secret": "token_secret_env or token_secret_file",
                   "token": "token_id plus token_secret_env or token_secret_file"}


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


class SecretRef(_Model):
    """Where a secret lives: an environment variable or a file (0600)."""

    env: str | None = None
    file: str | None = None


class SSHConfig(_Model):
    user: str = "root"
    port: int = Field(22, ge=1, le=65535)
    key_file: str | None = None
    known_hosts_file: str = "~/.ssh/known_hosts"
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    password_env: str | None = None
    password_file: str | None = None
    connect_timeout: float = Field(10.0, gt=0)


class APIConfig(_Model):
    url: str
    token_id: str | None = None
    token_secret_env: str | None = None
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


class ContainerSpec(_Model):
    """An LXC guest on a node."""

    hostname: str | None = None
    gpus: Literal["all"] | list[int] = "all"
    template: str | None = None
    cores: int = Field(8, ge=1)
    memory: int = Field(65536, ge=64, description="MiB")
    swap: int = Field(0, ge=0)
    rootfs: str = "local-lvm:64"
    net0: str | None = None
    unprivileged: bool = False
    features: str | None = None
    onboot: bool = True


class VMSpec(_Model):
    """A KVM guest on a node."""

    name: str | None = None
    gpus: Literal["all"] | list[int] = "all"
    cores: int = Field(8, ge=1)
    memory: int = Field(65536, ge=64)


class NodeSpec(_Model):
    """A Proxmox VE node (or any Linux host gpuhost manages)."""

    name: str = ""
    address: str
    #: ``api``: only the PVE HTTPS API (a token) is available for this node
    connection: Literal["ssh", "local", "api"] = "ssh"
    ssh: SSHConfig = SSHConfig()
    api: APIConfig | None = None
    vars: dict[str, Any] = Field(default_factory=dict)
    groups: tuple[str, ...] = ()
    containers: dict[int, ContainerSpec] = Field(default_factory=dict)
    vms: dict[int, VMSpec] = Field(default_factory=dict)

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

    @field_validator("containers", "vms")
    @classmethod
    def _guest_ids(cls, v: dict[int, Any]) -> dict[int, Any]:
        for gid in v:
            if not 100 <= gid <= 999_999_999:
                raise ValueError(f"guest id {gid} is outside PVE's range 100..999999999")
        return v


class GroupSpec(_Model):
    nodes: list[str] = Field(default_factory=list)
    vars: dict[str, Any] = Field(default_factory=dict)


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
