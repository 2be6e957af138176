from gpuhost.facts.packages import parse_dpkg_query
from gpuhost.operations.apt import Apt
from gpuhost.operations.command import Command
from tests.support.local import local_host


def test_command_guards(tmp_path):
    host = local_host()
    marker = tmp_path / "done"
    op = Command.from_dict({"cmd": f"touch {marker}", "creates": str(marker)})
    assert op.plan(host).changes
    marker.touch()
    host.invalidate_facts()
    assert op.plan(host).reason == f"{marker} exists"
    assert not Command.from_dict({"cmd": "false", "unless": "true"}).plan(host).changes
    assert (
        Command.from_dict({"cmd": "x", "removes": str(tmp_path / "nope")}).plan(host).reason.endswith("does not exist")
    )


# Captured on a Debian 12 machine: dpkg-query -W -f '${Package}\t${Version}\t${db:Status-Abbrev}\n' ...
DPKG = "bash\t5.2.15-2+b7\tii \nlibc6:amd64\t2.36-9+deb12u14\tii \nrc-only\t1.0\trc \n"


def test_parse_dpkg_query_keeps_installed_only():
    assert parse_dpkg_query(DPKG) == {"bash": "5.2.15-2+b7", "libc6": "2.36-9+deb12u14"}


def test_apt_on_this_machine_sees_installed_package_and_plans_missing_one():
    host = local_host()
    have = Apt.from_dict({"packages": ["bash", "coreutils"]}).plan(host)
    assert not have.changes and "bash" in have.reason
    missing = Apt.from_dict({"packages": {"bash": None, "gpuhost-no-such-pkg": "1.0"}}).plan(host)
    assert missing.changes
    assert "gpuhost-no-such-pkg=1.0" in missing.actions[-1].command
    assert "bash" not in missing.actions[-1].command.split("install", 1)[1]


def test_apt_wrong_version_is_planned_as_install():
    host = local_host()
    plan = Apt.from_dict({"packages": {"bash": "0.0-test"}}).plan(host)
    assert plan.changes and "bash=0.0-test" in plan.actions[0].command
