"""What the validator is told about the target machine (from host facts and the P2P verdict)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class P2pSummary(BaseModel):
    """The gist of a ``gpuhost verify p2p`` verdict, as far as NCCL cares."""

    model_config = ConfigDict(frozen=True)

    available: bool = Field(description="peer access works between the GPUs that will serve")
    data_ok: bool = Field(True, description="P2P copies returned the right bytes")
    level: str | None = Field(None, description="deepest common ancestor that still passes: NVL, PIX, PXB, PHB, SYS")

    @field_validator("level")
    @classmethod
    def _level(cls, level: str | None) -> str | None:
        if level is not None and level.upper() not in ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS"):
            raise ValueError("level must be one of LOC, NVL, PIX, PXB, PHB, SYS")
        return level.upper() if level else None


class TargetFacts(BaseModel):
    """The serving machine: GPU architectures (one per GPU), driver version, optional P2P verdict."""

    model_config = ConfigDict(frozen=True)

    gpu_archs: list[str] = Field(description="one smNN per GPU, e.g. ['sm120'] * 8")
    driver_version: str | None = Field(None, description="NVIDIA driver, e.g. 580.95.05")
    p2p: P2pSummary | None = None

    @property
    def driver_major(self) -> int | None:
        if not self.driver_version:
            return None
        head = self.driver_version.split(".")[0]
        return int(head) if head.isdigit() else None


def arch_of_capability(major: int, minor: int) -> str:
    """``(12, 0)`` → ``sm120``."""
    return f"sm{major}{minor}"
