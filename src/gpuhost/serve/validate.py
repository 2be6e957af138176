"""Validate a profile for a target before anything is installed: FAIL findings mean refuse."""

from __future__ import annotations

from gpuhost.checks import Finding, Level, worst
from gpuhost.serve.command import check_nccl_env
from gpuhost.serve.facts import TargetFacts
from gpuhost.serve.flagcheck import check_flags
from gpuhost.serve.multinode import check_multinode
from gpuhost.serve.profile import Profile
from gpuhost.serve.rules import run_rules


def validate(profile: Profile, facts: TargetFacts) -> list[Finding]:
    """Flags against the real table, then every known-bad-combination rule, then the NCCL settings, then (a
    multi-node profile) its sizes and ports."""
    return [
        *check_flags(profile),
        *run_rules(profile, facts),
        *check_nccl_env(profile, facts.p2p),
        *check_multinode(profile),
    ]


def refused(findings: list[Finding]) -> bool:
    return worst(findings) >= Level.FAIL
