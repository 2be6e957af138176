"""The check catalog (``gpuhost.checks.finding.check``): what ``gpuhost verify --list`` and the reference pages show
for a check, and a name registered twice refused. Run on an empty catalog so the registration runs under the test."""

from __future__ import annotations

import pytest

from gpuhost.checks import finding


def test_a_check_is_registered_with_everything_the_catalog_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finding, "_REGISTRY", {})

    @finding.check("test.example", title="An example", group="test", meaning="what it means", fix="what to do")
    def example() -> None:
        pass

    info = finding.registered()["test.example"]
    assert (info.name, info.title, info.group, info.meaning, info.fix) == (
        "test.example",
        "An example",
        "test",
        "what it means",
        "what to do",
    )
    assert example.check_name == "test.example"  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="^check 'test.example' registered twice$"):
        finding.check("test.example", title="t", group="g", meaning="m", fix="f")(lambda: None)
    assert list(finding.registered()) == ["test.example"]


def test_a_finding_as_json_has_every_field_by_its_name() -> None:
    f = finding.Finding(finding.Level.FAIL, "ct.uvm", "pve1/CT 200", "/dev/nvidia-uvm is missing", cause="c", fix="x")
    assert f.to_json() == {
        "level": "FAIL",
        "check": "ct.uvm",
        "subject": "pve1/CT 200",
        "message": "/dev/nvidia-uvm is missing",
        "cause": "c",
        "fix": "x",
    }
    assert finding.worst([f, finding.Finding(finding.Level.PASS, "a", "s", "m")]) is finding.Level.FAIL
    assert finding.worst([]) is finding.Level.PASS
