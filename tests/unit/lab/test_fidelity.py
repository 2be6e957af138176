"""The lab-fidelity page's table points at lab code that exists, and the page renders every row."""

from __future__ import annotations

import re
from pathlib import Path

from gpuhost.lab.fidelity import BEHAVIOURS, NOT_REHEARSED, render

LAB = Path(__file__).resolve().parents[3] / "src" / "gpuhost"


def test_every_lab_reference_names_a_function_that_exists():
    for b in BEHAVIOURS:
        for ref in re.split(r";\s*", b.lab):
            path, _, funcs = ref.partition(":")
            text = (LAB / path.strip()).read_text()
            for func in filter(None, (f.strip() for f in funcs.split(","))):
                if "/" in func:  # "lab/node/qemu.py:update" after a comma
                    sub, _, name = func.partition(":")
                    assert f"def {name}(" in (LAB / sub.strip()).read_text(), (b.what, func)
                else:
                    assert f"def {func}(" in text, (b.what, ref)


def test_every_behaviour_cites_an_upstream_source_and_is_on_the_page():
    page = render()
    for b in BEHAVIOURS:
        assert re.search(r"(proxmox|NVIDIA|lxc)/|proxmox-kernel-helper", b.source), b.source
        assert b.area in page and b.source.replace("|", "\\|") in page
    for item in NOT_REHEARSED:
        assert f"- {item}" in page
