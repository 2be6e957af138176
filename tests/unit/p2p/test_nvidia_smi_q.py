"""``nvidia-smi -q`` read as evidence, on real captures (tests/fixtures/host/nvidia-smi-q, host/SOURCE.md)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpuhost.cli.app import _register, app
from gpuhost.p2p.parsers import read_capture

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "host" / "nvidia-smi-q"
_register()


def test_rtx2080_link_and_bar1_are_read_and_the_x8_link_fails():
    ev, _ = read_capture((FIX / "geforce-rtx2080-x8-of-x16_excerpt.txt").read_text())
    (g,) = ev.gpus
    assert (g.name, g.bus_id) == ("NVIDIA GeForce RTX 2080", "00000000:02:00.0")
    assert (g.pcie_gen_max, g.pcie_width_max, g.pcie_width_idle) == (3, 16, 8)
    assert g.bar1_bytes == 256 << 20 and g.virtualization == "none"
    r = CliRunner().invoke(app, ["verify", "p2p", "--from-file", str(FIX / "geforce-rtx2080-x8-of-x16_excerpt.txt")])
    assert r.exit_code == 1 and "PCIe link runs x8 of x16" in r.output


def test_idle_gen1_on_an_old_driver_is_not_judged_as_a_downtrained_link():
    ev, _ = read_capture((FIX / "quadro-m2200-384-gen3x16-idle-gen1_excerpt.txt").read_text())
    (g,) = ev.gpus
    assert (g.name, g.pcie_gen_max, g.pcie_width_idle, g.virtualization) == ("Quadro M2200", 3, 16, None)
    path = str(FIX / "quadro-m2200-384-gen3x16-idle-gen1_excerpt.txt")
    r = CliRunner().invoke(app, ["verify", "p2p", "--from-file", path])
    assert r.exit_code == 0 and "256 MiB" in r.output
    j = CliRunner().invoke(app, ["verify", "p2p", "--json", "--from-file", path])
    (gpu,) = json.loads(j.output)["gpus"]
    assert [(f["check"], f["level"], f["message"]) for f in gpu["findings"]] == [
        ("link-width", "PASS", "PCIe x16 as the slot allows")
    ]
