"""What a GPU container shows from inside, read in one round trip (through ``pct exec``)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.facts.batch import parse_sections, sections_command
from gpuhost.facts.nvidia import USERSPACE_LISTING, parse_nvml_library_versions
from gpuhost.resources import read_tool

#: A tiny stdlib program that loads libcuda and calls cuInit: ``rc name devices`` or ``nolib …`` (exit 3).
CUINIT = read_tool("cuinit.py")


def container_probes() -> dict[str, str]:
    return {
        "smi": "nvidia-smi -L 2>&1",
        "userspace": USERSPACE_LISTING,
        "uvm": "test -c /dev/nvidia-uvm",
        "memlock": "ulimit -l",
        "python": "command -v python3",
        "cuinit": f"python3 -c {shlex.quote(CUINIT)}",
    }


@dataclass(frozen=True)
class ContainerFacts:
    nvidia_smi_exit: int
    nvidia_smi_output: str
    userspace_version: str | None
    uvm_present: bool
    memlock: str
    has_python: bool
    cuinit_exit: int
    cuinit_output: str


def parse_container_facts(result: CommandResult) -> ContainerFacts:
    s = parse_sections(result.stdout)
    versions = parse_nvml_library_versions(s["userspace"].output) if "userspace" in s else []
    smi = s.get("smi")
    cu = s.get("cuinit")
    return ContainerFacts(
        nvidia_smi_exit=smi.status if smi else 127,
        nvidia_smi_output=smi.output if smi else "",
        userspace_version=versions[0] if versions else None,
        uvm_present=bool(s.get("uvm") and s["uvm"].ok),
        memlock=s["memlock"].output.strip() if "memlock" in s else "",
        has_python=bool(s.get("python") and s["python"].ok),
        cuinit_exit=cu.status if cu else 127,
        cuinit_output=cu.output if cu else "",
    )


container_facts: Fact[ContainerFacts] = Fact(
    "container facts", lambda: sections_command(container_probes()), parse_container_facts
)
