"""The inventory: Proxmox nodes, their guests, groups and variables.

Secrets (API token secrets, SSH passwords) are never written inline: the inventory names
an environment variable (``*_env``) or a file (``*_file``) that holds them.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from gpuhost.inventory.names import safe_name

_INLINE_SECRETS = {
    "password": "password_env or password_file",
    "token_secret": "token_secret_env or token_secret_file",
    "token": "token_id plus token_secret_env or token_secret_file",
    "api_key": "api_key_env or api_key_file",
    "hf_token": "hf_token_env or hf_token_file",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

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

    address: str = Field(description="IP address or host name of the bastion")
    user: str = Field(default="root", description="login user on the bastion")
    port: int = Field(default=22, ge=1, le=65535, description="SSH port of the bastion")
    key_file: str | None = Field(default=None, description="private key for the bastion (default: the node's)")
    known_hosts_file: str | None = Field(default=None, description="known_hosts for the bastion (default: the node's)")


class SSHConfig(_Model):
    """How to reach a node by SSH. A field not written here is taken from ``~/.ssh/config``
    (``config_file``) for the node's address, then from the defaults below."""

    user: str = Field(default="root", description="login user")
    port: int = Field(default=22, ge=1, le=65535, description="SSH port")
    key_file: str | None = Field(default=None, description="private key file; null: the SSH agent and default keys")
    known_hosts_file: str = Field(
        default="~/.ssh/known_hosts", description="known_hosts file the host key is checked against"
    )
    host_key_policy: Literal["strict", "accept-new"] = Field(
        default="strict",
        description="strict: refuse an unknown or changed key; accept-new: trust and record a first-seen key",
    )
    password_env: EnvName | None = Field(default=None, description="environment variable holding the SSH password")
    password_file: str | None = Field(default=None, description="file (mode 0600) holding the SSH password")
    connect_timeout: float = Field(default=10.0, gt=0, description="seconds to wait for the SSH connection")
    command_timeout: float | None = Field(
        default=600.0, gt=0, description="seconds a remote command may run when its operation sets no timeout"
    )
    keepalive: float = Field(
        default=15.0, gt=0, description="seconds of silence before the node is asked if it is alive"
    )
    keepalive_count: int = Field(
        default=3, ge=1, le=100, description="unanswered keepalives after which the node is declared unreachable"
    )
    config_file: str = Field(
        default="~/.ssh/config",
        description="OpenSSH client config read for HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand "
        "(none: read none)",
    )
    jump: JumpHost | None = Field(default=None, description="a bastion the connection is tunnelled through")
    use_agent: bool = Field(default=True, description="offer the keys of a running ssh-agent (SSH_AUTH_SOCK)")
    become: bool = Field(default=False, description="run every command as root through sudo -n (passwordless sudo)")
    persist: float = Field(
        default=60,
        ge=0,
        le=86400,
        description="seconds this user's gpuhost keeper holds the node's SSH connection open after its last use, "
        "for the next run's remembered reads (as OpenSSH's ControlPersist; 60 s, Ansible's default); 0: off",
    )


class APIConfig(_Model):
    url: str = Field(description="the PVE API, https://HOST:8006")
    token_id: str | None = Field(default=None, description="API token id, user@realm!tokenname")
    token_secret_env: EnvName | None = Field(default=None, description="environment variable holding the token secret")
    token_secret_file: str | None = Field(default=None, description="file (mode 0600) holding the token secret")
    ca_file: str | None = Field(
        default=None,
        description="CA bundle to verify the API's TLS certificate: the node's /etc/pve/pve-root-ca.pem",
    )
    fingerprint: str | None = Field(
        default=None,
        description="instead of ca_file: the SHA-256 fingerprint of the API's certificate, AA:BB:… "
        "(pvenode cert info on the node)",
    )
    verify_tls: bool = Field(default=True, description="verify the API's TLS certificate")

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
        if self.fingerprint is not None:
            if self.ca_file:
                raise ValueError("give ca_file or fingerprint, not both")
            if not re.fullmatch(r"([0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}", self.fingerprint):
                raise ValueError("fingerprint must be a SHA-256 fingerprint, 32 hex bytes separated by ':'")
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


_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class ServeSpec(_Model):
    """What a guest serves with SGLang (``gpuhost launch sglang``). Secrets only through ``*_env`` / ``*_file``."""

    profile: str = Field(description="launch profile name (gpuhost.serve profiles, or one of sglang_profile_dirs)")
    model: str | None = Field(
        None,
        description="Hugging Face repo id (owner/name, downloaded on the target) or an absolute path already on "
        "the target; default: the profile's model",
    )
    model_revision: str | None = Field(
        None, description="repo revision (branch, tag or commit) to download and serve (SGLang's --revision)"
    )
    model_node_dir: str | None = Field(
        None,
        description="absolute directory on the node copied once into the container at `model` (small snapshots, "
        "the lab); large checkpoints belong on a bind mount or are downloaded",
    )
    host: str | None = Field(None, description="address the server listens on; default: the profile's --host")
    port: int | None = Field(None, ge=1, le=65535, description="HTTP port; default: the profile's --port")
    api_key_env: EnvName | None = Field(None, description="environment variable holding the server's API key")
    api_key_file: str | None = Field(None, description="file (mode 0600) holding the server's API key")
    hf_token_env: EnvName | None = Field(
        None, description="environment variable holding a Hugging Face token (downloads a gated or private repo id)"
    )
    hf_token_file: str | None = Field(
        None, description="file (mode 0600) holding a Hugging Face token (downloads a gated or private repo id)"
    )

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str) -> str:
        if not _PROFILE_NAME.match(v) or ".." in v:
            raise ValueError("not a profile name (letters, digits, '.', '_', '-'; no '..')")
        return v

    @field_validator("model")
    @classmethod
    def _model(cls, v: str | None) -> str | None:
        if v is not None and not (v.startswith("/") and ".." not in v.split("/")) and not _REPO_ID.match(v):
            raise ValueError("neither a Hugging Face repo id (owner/name) nor an absolute path")
        if v is not None and any(c.isspace() or c in "\"'$`\\;|&<>" for c in v):
            raise ValueError("must not contain spaces, quotes or shell characters")
        return v

    @field_validator("model_revision")
    @classmethod
    def _revision(cls, v: str | None) -> str | None:
        if v is not None and (not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}", v) or ".." in v):
            raise ValueError("not a branch, tag or commit (letters, digits, '.', '_', '-', '/')")
        return v

    @field_validator("model_node_dir")
    @classmethod
    def _node_dir(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith("/") or ".." in v.split("/") or any(c.isspace() for c in v)):
            raise ValueError("must be an absolute path without '..' or spaces")
        return v

    @model_validator(mode="after")
    def _secrets(self) -> ServeSpec:
        if self.api_key_env and self.api_key_file:
            raise ValueError("give api_key_env or api_key_file, not both")
        if self.hf_token_env and self.hf_token_file:
            raise ValueError("give hf_token_env or hf_token_file, not both")
        if self.model_node_dir and not (self.model and self.model.startswith("/")):
            raise ValueError("model_node_dir needs model: the absolute path it is copied to in the container")
        return self


def _hostname(v: str) -> str:
    if not _HOSTNAME.match(v):
        raise ValueError("invalid format - value does not look like a valid DNS name (RFC 1123)")
    return v


#: A container's host name: PVE's ``dns-name`` format (RFC 1123).
Hostname = Annotated[str, AfterValidator(_hostname)]
#: A guest id in PVE's range (``pve-vmid``: 100..999999999).
GuestId = Annotated[int, Field(ge=100, le=999_999_999)]
#: A group id inside a container (the owner of the passed device nodes).
DeviceGid = Annotated[int, Field(ge=0, le=65535)]


class ContainerResources(BaseModel):
    """The container settings PVE stores, declared once: the inventory's :class:`ContainerSpec` and the
    ``lxc_container`` operation's arguments both are these fields, with the same bounds and validators."""

    cores: int = Field(default=8, ge=1, le=8192, description="CPU cores")
    memory: int = Field(default=65536, ge=64, description="memory in MiB")
    swap: int = Field(default=0, ge=0, description="swap in MiB")
    rootfs: str = Field(
        default="local-lvm:64", description="STORAGE:SIZE_GiB or an existing volume, PVE's rootfs syntax"
    )
    net0: str | None = Field(default=None, description="PVE net0 property string, e.g. name=eth0,bridge=vmbr0,ip=dhcp")
    unprivileged: bool = Field(default=False, description="an unprivileged container (user namespaces)")
    features: str | None = Field(default=None, description="PVE features string, e.g. nesting=1")
    onboot: bool = Field(default=True, description="start the container when the node boots")

    def resources(self) -> dict[str, Any]:
        """These fields alone, as keyword arguments for another :class:`ContainerResources`."""
        return {name: getattr(self, name) for name in ContainerResources.model_fields}

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


class ContainerSpec(_Model, ContainerResources):
    """An LXC guest on a node. Values PVE would refuse are refused here, before any host is touched."""

    hostname: Hostname | None = Field(default=None, description="DNS name of the container (RFC 1123); default gpuCTID")
    gpus: Literal["all"] | list[int] = Field(
        default="all", description="the node's GPU indices to pass through, or all"
    )
    template: str | None = Field(
        default=None,
        description="volid of the OS template (STORAGE:vztmpl/FILE.tar.zst); "
        "default: the newest Debian 12 template on lxc_storage",
    )
    serve: ServeSpec | None = Field(default=None, description="what this container serves (gpuhost launch sglang)")

    @field_validator("template")
    @classmethod
    def _template(cls, v: str | None) -> str | None:
        if v is not None and (".." in v or not _VOLID.match(v)):
            raise ValueError("not a template volume id such as local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst")
        return v


def host_address(v: str) -> str:
    """An IP address or a host name (what SSH connects to): one machine, so no unspecified (``0.0.0.0``, ``::``),
    broadcast or multicast address; a name is RFC 1123 (no leading ``-``, which ssh would read as an option) and
    not all digits (``300.1.1.1`` is a mistyped address, not a name)."""
    v = v.strip()
    if not v:
        raise ValueError("must not be empty")
    try:
        ip = ipaddress.ip_address(v)
    except ValueError:
        if not _HOSTNAME.match(v):
            raise ValueError(f"'{v}' is neither an IP address nor a host name") from None
        if all(part.isdigit() for part in v.split(".")):
            raise ValueError(f"'{v}' is not an IP address (each of its four numbers must be 0..255)") from None
        return v
    if ip.is_unspecified or ip.is_multicast or (isinstance(ip, ipaddress.IPv4Address) and v == "255.255.255.255"):
        kind = "unspecified" if ip.is_unspecified else "multicast" if ip.is_multicast else "broadcast"
        raise ValueError(f"'{v}' is a {kind} address, not one machine's")
    return v


_PCI_ADDR = re.compile(r"^(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-7])?$")
_MAPPING = re.compile(r"^mapping=[a-z][a-z0-9_\-]*$", re.IGNORECASE)  # PVE's pve-configid format
_EFIDISK = re.compile(r"^[a-z][a-z0-9\-_.]*[a-z0-9]:(\d+|[A-Za-z0-9][A-Za-z0-9_./-]*)(,[a-z\-]+=[A-Za-z0-9_.]+)*$")


class VMSpec(_Model):
    """A KVM guest on a node that gets GPUs by passthrough. The VM must exist; gpuhost owns only its GPU keys
    (machine, bios/efidisk0 when asked, cpu model, the GPUs' hostpciN, the clique words of args)."""

    gpus: Literal["all"] | list[str] = Field(
        "all",
        description="the node's NVIDIA GPUs to pass through: all, or PCI addresses (0000:41:00.0, 41:00), "
        "or PVE resource mappings (mapping=gpu0)",
    )
    clique: Literal["numa", "single", "none"] = Field(
        "numa",
        description="GPUDirect P2P cliques (x-nv-gpudirect-clique): numa = one clique per NUMA node / root "
        "complex, single = every GPU in clique 0, none = no clique (P2P stays off in the guest)",
    )
    bios: Literal["keep", "ovmf"] = Field(
        "keep", description="keep the VM's firmware, or switch it to OVMF (UEFI; needs an efidisk0)"
    )
    efidisk_storage: StorageId | None = Field(
        None, description="storage for the efidisk0 that OVMF needs when the VM has none (e.g. local-lvm)"
    )
    memory: int | None = Field(None, ge=16, description="MiB; unset: leave the VM's")
    cores: int | None = Field(None, ge=1, le=8192, description="unset: leave the VM's")
    numa: bool | None = Field(None, description="PVE's numa flag; unset: leave the VM's")
    address: str | None = Field(
        None, description="the guest's SSH address (IP or host name), for the in-guest steps (driver, P2P check)"
    )
    ssh: SSHConfig = Field(
        default_factory=lambda: SSHConfig.model_validate({}), description="how gpuhost logs in to the guest"
    )
    boot_timeout: float = Field(
        300.0, gt=0, description="seconds to wait for the guest's SSH after the VM starts or restarts"
    )

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list):
            if not v:
                raise ValueError("list at least one GPU, or write all")
            for item in v:
                if not (_PCI_ADDR.match(item.lower()) or _MAPPING.match(item)):
                    raise ValueError(
                        f"'{item}' is neither a PCI address ([dddd:]bb:dd[.f], e.g. 0000:41:00.0) "
                        "nor a resource mapping (mapping=<id>)"
                    )
            if len(set(v)) != len(v):
                raise ValueError("a GPU is listed twice")
        return v

    @field_validator("address")
    @classmethod
    def _addr(cls, v: str | None) -> str | None:
        return None if v is None else host_address(v)


class NodeSpec(_Model):
    """A Proxmox VE node (or any Linux host gpuhost manages)."""

    name: str = Field(default="", description="filled in by gpuhost from the node's key under nodes")
    address: str = Field(description="IP address or host name gpuhost connects to")
    #: ``api``: only the PVE HTTPS API (a token) is available for this node
    connection: Literal["ssh", "local", "api"] = Field(
        default="ssh",
        description="how gpuhost reaches the node: ssh, local (this machine), or api (only the PVE HTTPS API)",
    )
    ssh: SSHConfig = Field(default_factory=lambda: SSHConfig.model_validate({}), description="SSH settings")
    api: APIConfig | None = Field(default=None, description="the PVE HTTPS API (optional)")
    vars: dict[str, Any] = Field(
        default_factory=dict, description="variables for this node (override group and file vars)"
    )
    groups: tuple[str, ...] = Field(
        default=(), description="filled in by gpuhost: the groups that list this node (write membership under groups:)"
    )
    containers: dict[int, ContainerSpec] = Field(default_factory=dict, description="the node's LXC guests by id")
    vms: dict[int, VMSpec] = Field(default_factory=dict, description="KVM guests that get GPUs by passthrough")
    #: the operator's standing consent for this node (the command-line flags give it per run);
    #: never taken from playbook, role or -e variables
    allow_reboot: bool = Field(default=False, description="gpuhost may reboot this node without --allow-reboot")
    allow_restart: bool = Field(
        default=False, description="gpuhost may restart this node's guests without --allow-restart"
    )

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        return host_address(v)

    @model_validator(mode="after")
    def _api_needs_api(self) -> NodeSpec:
        if self.connection == "api" and self.api is None:
            raise ValueError("connection: api needs an 'api' section (url, token_id, token_secret_env/_file)")
        return self

    @model_validator(mode="after")
    def _vms_need_root(self) -> NodeSpec:
        if self.vms and self.connection == "api":
            raise ValueError(
                "vms: VM passthrough needs root over SSH, and connection is api (a token only): PVE lets only "
                "root@pam set 'args' ('only root can set 'args' config') and raw hostpciN ('only root can set "
                "'hostpci0' config for non-mapped devices'); an API token is never root@pam, even root@pam!name. "
                "Fix: give gpuhost SSH as root to this node"
            )
        both = sorted(set(self.vms) & set(self.containers))
        if both:
            raise ValueError(f"guest id {both[0]} is both a container and a VM")
        return self

    @field_validator("containers", "vms", mode="before")
    @classmethod
    def _distinct_ids(cls, v: Any) -> Any:
        """``200`` and ``"200"`` are one guest id: written twice, the second would silently replace the first."""
        if isinstance(v, dict):
            seen: dict[str, Any] = {}
            for key in v:
                text = str(key).strip()
                if text in seen:
                    raise ValueError(f"guest id {text} is written twice ({seen[text]!r} and {key!r})")
                seen[text] = key
        return v

    @field_validator("containers", "vms")
    @classmethod
    def _guest_ids(cls, v: dict[int, Any]) -> dict[int, Any]:
        for gid in v:
            if not 100 <= gid <= 999_999_999:
                raise ValueError(f"guest id {gid} is outside PVE's range 100..999999999")
        return v


class GroupSpec(_Model):
    nodes: list[str] = Field(default_factory=list, description="the group's nodes")
    vars: dict[str, Any] = Field(default_factory=dict, description="variables for the group's nodes")
    ssh_defaults: SSHConfig | None = Field(
        default=None, description="ssh fields for every node of the group that does not write them itself"
    )


_GROUP_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,30}$")
#: the SGLang Model Gateway release gpuhost installs (PyPI ``smg``; formerly ``sglang-router``)
SMG_VERSION = "1.13.0"
SMG_POLICIES = ("cache_aware", "round_robin", "power_of_two", "random", "least_load", "consistent_hashing")


class ReplicaMember(_Model):
    """One node of a multi-node replica: a container with a ``serve:`` entry. Its rank is its place in
    ``members`` (the first is rank 0, which serves the API and hosts the rendezvous)."""

    node: str = Field(description="the node (a name under nodes:)")
    ctid: int = Field(description="the container on that node; it needs a serve: entry")


class ReplicaRef(_Model):
    """One replica of a serving group: a container with a ``serve:`` entry on a node (``node`` and ``ctid``), or one
    model served by tensor parallelism across several nodes (``members``, rank order)."""

    node: str | None = Field(None, description="the node (a name under nodes:); a one-node replica")
    ctid: int | None = Field(None, description="the container on that node; it needs a serve: entry")
    members: list[ReplicaMember] | None = Field(
        None,
        min_length=2,
        description="a replica over several nodes: its containers in rank order (the first is rank 0); the "
        "profile's multinode.nnodes must equal their number",
    )
    dist_init_host: str | None = Field(
        None,
        description="with members: the address the other members reach rank 0 at (SGLang --dist-init-addr's "
        "host); default: rank 0's serve.host",
    )
    url: str | None = Field(
        None,
        description="the URL the gateway reaches this replica at (http://HOST:PORT; rank 0's with members); "
        "default: the serve: entry's host and port",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^http://[A-Za-z0-9.\-\[\]:]+:\d{1,5}$", v):
            raise ValueError("must be http://HOST:PORT")
        return v

    @field_validator("dist_init_host")
    @classmethod
    def _dist_host(cls, v: str | None) -> str | None:
        return None if v is None else host_address(v)

    @model_validator(mode="after")
    def _one_form(self) -> ReplicaRef:
        if self.members is None:
            if self.node is None or self.ctid is None:
                raise ValueError("give node and ctid, or members (one replica over several nodes)")
            if self.dist_init_host is not None:
                raise ValueError("dist_init_host belongs to a replica with members")
        elif self.node is not None or self.ctid is not None:
            raise ValueError("give node and ctid, or members, not both")
        return self

    @property
    def ranks(self) -> list[ReplicaMember]:
        """The replica's containers in rank order (one for a one-node replica)."""
        if self.members is not None:
            return list(self.members)
        assert self.node is not None and self.ctid is not None
        return [ReplicaMember(node=self.node, ctid=self.ctid)]

    @property
    def multinode(self) -> bool:
        return self.members is not None


class GatewayHealth(_Model):
    """The gateway's active health checks of its replicas (``smg --health-*``)."""

    endpoint: str = Field("/health", description="path probed on each replica")
    interval_secs: int = Field(10, ge=1, le=3600, description="seconds between checks of one replica")
    timeout_secs: int = Field(5, ge=1, le=600, description="seconds one check may take")
    failure_threshold: int = Field(2, ge=1, le=100, description="failed checks before a replica is taken out")
    success_threshold: int = Field(1, ge=1, le=100, description="passed checks before it is put back")

    @field_validator("endpoint")
    @classmethod
    def _path(cls, v: str) -> str:
        if not re.match(r"^/[A-Za-z0-9_/.-]*$", v):
            raise ValueError("must be an absolute URL path")
        return v


def metrics_listen(host: str, port: int, prometheus_port: int | None) -> tuple[str, int]:
    """Where smg's Prometheus endpoint listens. smg 1.13.0 always serves it: without ``--prometheus-*`` it binds
    ``0.0.0.0:29000`` (observed on loopback: "Metrics server listening on 0.0.0.0:29000"; a second gateway on the
    node then fails with "failed to bind metrics server"). So gpuhost always names it: the written port on the
    gateway's address, or, when ``prometheus_port`` is None, loopback only at the gateway's port + 1."""
    return (host, prometheus_port) if prometheus_port else ("127.0.0.1", port + 1)


class GatewaySpec(_Model):
    """Where the group's SGLang Model Gateway (``smg``, a systemd service in a venv) runs and how it routes."""

    node: str = Field(description="the node the gateway runs on (on the node itself)")
    host: str | None = Field(None, description="address the gateway listens on; default: the node's address")
    port: int = Field(30080, ge=1, le=65535, description="the group's one endpoint (OpenAI API) on that address")
    policy: Literal["cache_aware", "round_robin", "power_of_two", "random", "least_load", "consistent_hashing"] = Field(
        "cache_aware", description="routing policy (smg --policy)"
    )
    health: GatewayHealth = Field(GatewayHealth.model_validate({}), description="health checks of the replicas")
    retries: int = Field(3, ge=0, le=20, description="retries of a failed request on another replica (0: none)")
    prometheus_port: int | None = Field(
        29000,
        ge=1,
        le=65535,
        description="Prometheus /metrics port on the gateway's address (None: on 127.0.0.1 at the gateway's port + 1; "
        "smg cannot turn it off)",
    )
    version: str = Field(SMG_VERSION, description="the smg release installed (pinned)")
    api_key_env: EnvName | None = Field(
        None, description="environment variable with the key clients and the gateway use; default: the replicas'"
    )
    api_key_file: str | None = Field(None, description="file (mode 0600) with that key; default: the replicas'")

    @field_validator("host")
    @classmethod
    def _host(cls, v: str | None) -> str | None:
        return None if v is None else host_address(v)

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not re.match(r"^\d+\.\d+\.\d+(\.post\d+)?$", v):
            raise ValueError("must be an exact release (e.g. 1.13.0)")
        return v

    @model_validator(mode="after")
    def _ports(self) -> GatewaySpec:
        if self.api_key_env and self.api_key_file:
            raise ValueError("give api_key_env or api_key_file, not both")
        if self.prometheus_port == self.port:
            raise ValueError("prometheus_port must differ from port")
        return self


class ServingGroup(_Model):
    """Replicas of one model on several nodes behind one gateway (``gpuhost launch sglang --group NAME``); without
    a gateway the group's replicas are launched on their own (e.g. one replica over several nodes)."""

    replicas: list[ReplicaRef] = Field(description="the group's replicas (at least one)", min_length=1)
    gateway: GatewaySpec | None = Field(None, description="the gateway in front of the replicas (None: no gateway)")


class ServingSpec(_Model):
    groups: dict[str, ServingGroup] = Field(default_factory=dict, description="serving groups by name")

    @field_validator("groups")
    @classmethod
    def _names(cls, v: dict[str, ServingGroup]) -> dict[str, ServingGroup]:
        for name in v:
            if not _GROUP_NAME.match(name):
                raise ValueError(f"group name '{name}': lowercase letters, digits, '_' and '-' (at most 31)")
        return v


class InventoryFile(_Model):
    """The document as written."""

    vars: dict[str, Any] = Field(default_factory=dict, description="variables for every node")
    nodes: dict[str, NodeSpec] = Field(description="the nodes by name (at least one)")
    groups: dict[str, GroupSpec] = Field(default_factory=dict, description="groups of nodes by name")
    serving: ServingSpec = Field(
        default_factory=ServingSpec, description="serving groups: replicas on several nodes behind one gateway"
    )

    @field_validator("nodes")
    @classmethod
    def _some_nodes(cls, v: dict[str, NodeSpec]) -> dict[str, NodeSpec]:
        if not v:
            raise ValueError("at least one node is needed")
        for name in v:
            safe_name(str(name), "node name")
        return v
