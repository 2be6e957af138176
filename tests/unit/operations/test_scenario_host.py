"""The scenario host: a HostContext filled with parsed values or captured outputs, loud about gaps."""

from __future__ import annotations

import pytest

from gpuhost.core.context import HostContext
from gpuhost.core.guest import Guest
from gpuhost.core.result import CommandResult
from gpuhost.facts import files
from gpuhost.facts.pve import PveVersion, ct_status, pve_version
from tests.support.scenario import Captured, MissingFact, ScenarioHost


def test_values_and_captures_go_through_the_real_parsers() -> None:
    host: HostContext = ScenarioHost(
        {
            pve_version: Captured("pve-manager/8.2.4/faa83925c9641325 (running kernel: 6.8.12-1-pve)\n"),
            ("CT status", (200,)): CommandResult("pct status 200", 0, "status: running\n", ""),
            (files.content, ("/etc/hostname",)): "pve1\n",
        }
    )
    assert host.fact(pve_version) == PveVersion(8, 2, 4)
    assert host.fact(ct_status, 200) == "running"
    assert host.fact(files.content, "/etc/hostname") == "pve1\n"


def test_a_fact_not_in_the_scenario_fails_naming_it_and_its_args() -> None:
    host = ScenarioHost({(ct_status, (200,)): "running"})
    with pytest.raises(MissingFact, match=r"no fact 'CT status' with args \[201\].*CT status\[200\]"):
        host.fact(ct_status, 201)
    with pytest.raises(MissingFact, match="no guest CT 7"):
        host.guest(Guest.ct(7))


def test_flags_guests_and_templates() -> None:
    ct = ScenarioHost({}, name="pve1/CT 200")
    host = ScenarioHost(
        {},
        check=True,
        reboot_pending=True,
        restarts_pending=frozenset({Guest.ct(200)}),
        guests={Guest.ct(200): ct},
        vars={"vfio_ids": ["10de:2bb5", "10de:22e8"]},
    )
    assert host.check and host.reboot_pending
    assert host.restart_pending(Guest.ct(200)) and not host.restart_pending(Guest.ct(201))
    assert host.guest(Guest.ct(200)) is ct
    assert "10de:2bb5,10de:22e8" in host.render_template("vfio.conf.j2")
    assert "10de:1" in host.render_template("vfio.conf.j2", {"vfio_ids": ["10de:1"]})
