"""PVE's root-only rules and pending semantics, without a node."""

from __future__ import annotations

import pytest

from gpuhost.lab.node import pending, pveconf, schema
from gpuhost.lab.node.errors import PveError

TOKEN = "root@pam!gpuhost"


def test_root_may_set_anything() -> None:
    schema.check_vm_modify_perm("root@pam", ["args", "hostpci0"], {"hostpci0": "0000:01:00.0"}, {})
    schema.check_ct_modify_perm("root@pam", ["dev0", "hookscript"])


def test_token_is_refused_raw_hostpci_args_and_dev() -> None:
    with pytest.raises(PveError, match=r"^only root can set 'hostpci0' config for non-mapped devices$"):
        schema.check_vm_modify_perm(TOKEN, ["hostpci0"], {"hostpci0": "0000:01:00.0,pcie=1"}, {})
    with pytest.raises(PveError, match=r"^only root can set 'args' config$"):
        schema.check_vm_modify_perm(TOKEN, ["args"], {"args": "-foo"}, {})
    with pytest.raises(PveError) as info:
        schema.check_ct_modify_perm(TOKEN, ["dev0"])
    assert info.value.http_status == 403
    assert info.value.message == "Permission check failed (configuring device passthrough is only allowed for root@pam)"


def test_token_may_use_mapped_devices_and_ordinary_keys() -> None:
    schema.check_vm_modify_perm(
        TOKEN, ["hostpci0", "memory", "machine", "net0"], {"hostpci0": "mapping=gpu0,pcie=1", "memory": "4096"}, {}
    )


def test_token_may_not_delete_a_raw_hostpci_either() -> None:
    with pytest.raises(PveError, match="non-mapped devices"):
        schema.check_vm_modify_perm(TOKEN, ["hostpci0"], {}, {"hostpci0": "0000:01:00.0"})


def test_unknown_and_raw_lxc_keys_are_not_in_the_schema() -> None:
    with pytest.raises(PveError) as info:
        schema.check_key("lxc", "lxc.cgroup2.devices.allow")
    assert info.value.http_status == 400
    assert info.value.errors == {
        "lxc.cgroup2.devices.allow": "property is not defined in schema and the schema does not allow additional properties"
    }


def test_dev_paths_must_be_under_dev() -> None:
    with pytest.raises(PveError):
        schema.check_value("lxc", "dev0", "/tmp/x")
    assert schema.parse_device("dev0", "/dev/nvidia0,gid=44") == {"path": "/dev/nvidia0", "gid": "44"}


def test_stage_then_apply_only_hotpluggable() -> None:
    conf = pveconf.parse("memory: 2048\nname: a\nsockets: 1\n", "qemu")
    pending.stage(
        conf, {"machine": "q35", "name": "b", "memory": "2048"}, [("sockets", False)], [], delete_drops_pending=True
    )
    pending.apply(conf, lambda key: key == "name")
    assert conf.text() == "memory: 2048\nname: b\nsockets: 1\n\n[PENDING]\ndelete: sockets\nmachine: q35\n"
    view = {i["key"]: i for i in pending.view(conf)}
    assert view["sockets"] == {"key": "sockets", "value": "1", "delete": 1}
    assert view["machine"] == {"key": "machine", "pending": "q35"}
    assert pending.effective(conf) == {"memory": "2048", "name": "b", "machine": "q35"}
    pending.apply(conf)
    assert conf.text() == "machine: q35\nmemory: 2048\nname: b\n"
