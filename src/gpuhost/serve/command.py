"""The exact launch command (argv) and environment of a profile."""

from __future__ import annotations

from pydantic import BaseModel

from gpuhost.checks import Finding, Level, check
from gpuhost.serve.facts import P2pSummary
from gpuhost.serve.profile import FlagValue, Profile

NCCL_CHECK = "serve.nccl-env"


class LaunchCommand(BaseModel):
    """What the launch role runs: ``env`` added to the service's environment, then ``argv``."""

    argv: list[str]
    env: dict[str, str]


def _value(v: bool | float | str) -> str:
    return str(v)


def _flag_argv(flag: str, value: FlagValue) -> list[str]:
    if value is True:
        return [flag]
    if value is False:
        return []
    if isinstance(value, list):
        return [flag, *(_value(v) for v in value)]
    return [flag, _value(value)]


def nccl_env(p2p: P2pSummary | None) -> dict[str, str]:
    """NCCL's P2P settings from a P2P verdict: off only when P2P is really off (or returns wrong data)."""
    if p2p is None:
        return {}
    if not p2p.available or not p2p.data_ok:
        return {"NCCL_P2P_DISABLE": "1"}
    return {"NCCL_P2P_LEVEL": p2p.level or "SYS"}


@check(
    NCCL_CHECK,
    title="NCCL P2P settings agree with the measured P2P verdict",
    group="serve",
    meaning="The profile's NCCL P2P variables contradict what the P2P probe measured.",
    fix="Let gpuhost derive NCCL_P2P_LEVEL / NCCL_P2P_DISABLE from the verdict.",
)
def check_nccl_env(profile: Profile, p2p: P2pSummary | None) -> list[Finding]:
    subject = f"profile {profile.name}"
    if p2p is None:
        return [Finding(Level.INFO, NCCL_CHECK, subject, "no P2P verdict given; NCCL P2P left to NCCL's defaults")]
    derived = nccl_env(p2p)
    out: list[Finding] = []
    if "NCCL_P2P_LEVEL" in derived and profile.env.get("NCCL_P2P_DISABLE") == "1":
        out.append(
            Finding(
                Level.WARN,
                NCCL_CHECK,
                subject,
                "profile disables NCCL P2P but P2P works",
                "all-reduce would go through host memory (the seeds' 13.7 µs latency floor)",
                "drop NCCL_P2P_DISABLE from the profile",
            )
        )
    if "NCCL_P2P_DISABLE" in derived:
        why = "P2P copies returned wrong data" if p2p.available else "P2P is unavailable"
        out.append(
            Finding(
                Level.WARN,
                NCCL_CHECK,
                subject,
                f"{why}: NCCL_P2P_DISABLE=1 will be set",
                "NCCL would otherwise hang or corrupt all-reduces",
                "fix P2P (run gpuhost verify p2p)",
            )
        )
    else:
        level = derived["NCCL_P2P_LEVEL"]
        out.append(Finding(Level.PASS, NCCL_CHECK, subject, f"NCCL_P2P_LEVEL={level} from the verdict"))
    return out


def render(profile: Profile, p2p: P2pSummary | None = None) -> LaunchCommand:
    """``argv`` (entrypoint, model, TP size, then the profile's flags in order) and ``env``."""
    argv = list(profile.entrypoint)
    names = {f.split("=", 1)[0] for f in profile.flags}
    if not names & {"--model-path", "--model"}:
        argv += ["--model-path", profile.model]
    if not names & {"--tp-size", "--tensor-parallel-size", "--tp"}:
        argv += ["--tp-size", str(profile.tp_size)]
    for flag, value in profile.flags.items():
        argv += _flag_argv(flag, value)
    env = dict(profile.env)
    derived = nccl_env(p2p)
    if derived:
        for key in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"):
            env.pop(key, None)
        env.update(derived)
    return LaunchCommand(argv=argv, env=env)
