"""Launch profiles: YAML data typed by :class:`Profile`, shipped ones plus the user's own."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpuhost import yamlfile
from gpuhost.errors import ConfigError
from gpuhost.inventory.names import env_key, safe_name, single_line

#: A flag's value in a profile: ``true`` means a bare switch; a list repeats the flag's values (nargs="+").
FlagValue = bool | int | float | str | list[str | int | float]


class Pins(BaseModel):
    """The SGLang release and the companion packages it was built and tested against."""

    model_config = ConfigDict(extra="forbid")

    sglang: str
    transformers: str
    flashinfer: str | None = None
    torch: str | None = None
    sgl_deep_gemm: str | None = None
    cuda: int = Field(13, description="CUDA major of the wheels/images (13 from SGLang 0.5.20 on)")


class MultiNode(BaseModel):
    """Tensor parallelism across nodes (SGLang ``--nnodes/--node-rank/--dist-init-addr``): ``tp_size`` is global,
    ``gpus`` is per node; rank 0 serves the API, followers only a dummy ``/health`` that always answers 200."""

    model_config = ConfigDict(extra="forbid")

    nnodes: int = Field(ge=2, le=64, description="nodes of one replica (SGLang --nnodes)")
    dist_init_port: int = Field(
        20000, ge=1024, le=65535, description="torch.distributed rendezvous on rank 0; ZMQ uses the next 6 ports"
    )
    nccl_port: int = Field(
        20010, ge=1024, le=65535, description="SGLang --nccl-port (pinned, so a firewall can open it)"
    )
    socket_ifname: str | None = Field(
        None, description="interface NCCL and Gloo use between the nodes (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME)"
    )
    dist_timeout: int = Field(3600, ge=60, description="seconds torch.distributed init may take (--dist-timeout)")


class Profile(BaseModel):
    """One way to serve one model with SGLang on one kind of GPU."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    status: str = Field("current", description="current | fallback | historical")
    fallback_of: str | None = None
    pins: Pins
    model: str = Field(description="Hugging Face repo id or a local path")
    model_type: str | None = Field(None, description="config.json model_type, e.g. glm_moe_dsa")
    architectures: list[str] = Field(description="GPU architectures it is for, e.g. [sm120]")
    gpus: int = Field(ge=1, description="GPUs it needs")
    tp_size: int = Field(ge=1)
    entrypoint: list[str] = Field(default_factory=lambda: ["sglang", "serve"])
    flags: dict[str, FlagValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    multinode: MultiNode | None = Field(None, description="tensor parallelism across nodes (None: one node)")

    @field_validator("name", "fallback_of")
    @classmethod
    def _safe_name(cls, v: str | None) -> str | None:
        return None if v is None else safe_name(v, "profile name")

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        for key, value in env.items():
            single_line(value, f"value of {env_key(key)}")
        return env

    @field_validator("flags")
    @classmethod
    def _flag_names(cls, flags: dict[str, FlagValue]) -> dict[str, FlagValue]:
        for key in flags:
            if not key.startswith("--"):
                raise ValueError(f"flag '{key}' must be spelt with its leading '--'")
        return flags

    @field_validator("architectures")
    @classmethod
    def _archs(cls, archs: list[str]) -> list[str]:
        for a in archs:
            if not (a.startswith("sm") and a[2:].isdigit()):
                raise ValueError(f"architecture '{a}' is not of the form smNN (e.g. sm120)")
        return archs

    @field_validator("status")
    @classmethod
    def _status(cls, status: str) -> str:
        if status not in ("current", "fallback", "historical"):
            raise ValueError("status must be current, fallback or historical")
        return status


#: profiles parsed per file, keyed by its path and exact content: a launch asks for them several times per
#: container and play (about 3 ms a file to parse and validate), and a changed file is parsed again
_PARSED: dict[tuple[str, bytes], list[Profile]] = {}


def _from_file(path: Path) -> list[Profile]:
    try:
        key = (str(path), path.read_bytes())
    except OSError:
        return _parse_file(path)  # the loader names the problem
    if key not in _PARSED:
        _PARSED[key] = _parse_file(path)
    return list(_PARSED[key])


def _parse_file(path: Path) -> list[Profile]:
    data = yamlfile.load(path)
    if data is None:
        return []
    items = data.get("profiles") if isinstance(data, dict) and "profiles" in data else [data]
    prefix: list[str | int] = ["profiles"] if isinstance(data, dict) and "profiles" in data else []
    if not isinstance(items, list):
        raise ConfigError(
            "'profiles' must be a list", file=str(path), line=yamlfile.line_of(data, ["profiles"]), field="profiles"
        )
    out: list[Profile] = []
    for i, item in enumerate(items):
        loc: list[str | int] = [*prefix, i] if prefix else []
        try:
            out.append(Profile.model_validate(yamlfile.plain(item)))
        except ValidationError as exc:
            yamlfile.raise_validation(exc, data, path, ConfigError, prefix=loc)
    return out


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted([*path.glob("*.yml"), *path.glob("*.yaml")])
    return [path]


def shipped_dir() -> Path:
    return Path(str(resources.files("gpuhost.serve") / "profiles"))


def load_profiles(extra: Iterable[Path] = (), *, shipped: bool = True) -> dict[str, Profile]:
    """Shipped profiles, then each file or directory of ``extra`` (a later profile of the same name wins)."""
    found: dict[str, Profile] = {}
    paths = ([shipped_dir()] if shipped else []) + list(extra)
    for root in paths:
        for file in _files(root):
            for prof in _from_file(file):
                found[prof.name] = prof
    for prof in found.values():
        if prof.fallback_of and prof.fallback_of not in found:
            raise ConfigError(f"profile '{prof.name}' is a fallback of unknown profile '{prof.fallback_of}'")
    return found


def get_profile(name: str, extra: Iterable[Path] = ()) -> Profile:
    profiles = load_profiles(extra)
    if name not in profiles:
        raise ConfigError(f"no profile '{name}' (known: {', '.join(sorted(profiles))})")
    return profiles[name]


def profile_summary(p: Profile) -> dict[str, Any]:
    return {
        "name": p.name,
        "status": p.status,
        "sglang": p.pins.sglang,
        "model": p.model,
        "architectures": p.architectures,
        "tp_size": p.tp_size,
    }


def served_model_name(profile: Profile, model: str | None = None) -> str:
    """The model id clients (and smg, which routes by it) must name: ``--served-model-name``, else the model path
    the server was started with, as SGLang defaults it (sglang 0.5.23 ``arg_groups/serving_hook.py:642``:
    ``served_model_name = model_path`` when unset). Never ``default``: smg 1.13.0 answers 404 ``model_not_found``
    for a model no worker serves (observed on loopback)."""
    name = profile.flags.get("--served-model-name")
    return str(name) if name else (model or profile.model)
