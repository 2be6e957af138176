"""The lab refuses what PVE refuses: hostnames that are not DNS names, volume IDs with ../, rootfs junk."""

import pytest

from gpuhost.lab.node import formats, lxc
from gpuhost.lab.node.errors import PveError


@pytest.mark.parametrize("name", ["ct1", "llm-01", "a.b.example", "A1", "x" * 63])
def test_good_hostnames(name):
    lxc.check_params({"hostname": name})


@pytest.mark.parametrize("name", ["ct1\nevil", "ct1\n", "-ct", "ct-", "ct_1", "ct 1", "c;t", "ct..x", "", "$(id)"])
def test_bad_hostnames_fail_with_pves_text(name):
    with pytest.raises(PveError) as info:
        lxc.check_params({"hostname": name})
    assert info.value.cli_text() == (
        "400 Parameter verification failed.\nhostname: invalid format - value does not look like a valid DNS name\n"
    )


@pytest.mark.parametrize(
    "rootfs",
    [
        "local-lvm:8",
        "local-zfs:4,size=4G",
        "local-lvm:vm-105-disk-0,size=8G",
        "local-zfs:subvol-105-disk-0",
        "volume=local-lvm:8,acl=1",
    ],
)
def test_good_rootfs(rootfs):
    lxc.check_params({"rootfs": rootfs})


@pytest.mark.parametrize(
    "rootfs, text",
    [
        ("local-lvm:8;touch /tmp/x", "unable to parse lvm volume name '8;touch /tmp/x'"),
        ("local-lvm:$(reboot)", "unable to parse lvm volume name '$(reboot)'"),
        ("local-zfs:../../etc", "contains illegal character sequences"),
        ("local-lvm:vm-1-disk-0/../x", "contains illegal character sequences"),
        ("local-lvm:8,size=8G`id`", "unable to parse size"),
        ("local-lvm:8,evil=1", "invalid key in comma-separated list property: evil"),
        ("nowhere:8", "storage 'nowhere' does not exist"),
        ("9bad:vm-1-disk-0", "unable to parse volume ID"),
    ],
)
def test_bad_rootfs(rootfs, text):
    with pytest.raises(PveError) as info:
        lxc.check_params({"rootfs": rootfs})
    assert text in info.value.cli_text()


@pytest.mark.parametrize(
    "ostemplate, text",
    [
        (
            "local:vztmpl/../../../etc/shadow.tar.zst",
            "unable to parse directory volume name 'vztmpl/../../../etc/shadow",
        ),
        ("local:vztmpl/sub/x.tar.zst", "unable to parse directory volume name"),
        ("local:vztmpl/x.tar.zst;id", "unable to parse directory volume name"),
        ("/var/lib/vz/template/cache/../../../../etc/x", "illegal character sequences"),
    ],
)
def test_template_volids_with_dotdot_are_refused(ostemplate, text):
    with pytest.raises(PveError) as info:
        lxc._template_path(ostemplate)
    assert text in info.value.cli_text()


def test_mp_string_rules_match_pve_container():
    for ok in ("/mnt/data", "mnt/x", "/a.b/c"):
        formats.check_mp_string("mp0", ok)
    for bad in ("/a/../b", "/a/./b", "../a", "./a", "/a/..", "/a/."):
        with pytest.raises(PveError):
            formats.check_mp_string("mp0", bad)


def test_a_good_template_volid_maps_into_the_template_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(lxc, "TEMPLATE_DIR", str(tmp_path))
    (tmp_path / "debian-12-standard_12.7-1_amd64.tar.zst").write_bytes(b"")
    assert (
        lxc._template_path("local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst")
        == f"{tmp_path}/debian-12-standard_12.7-1_amd64.tar.zst"
    )
