"""gpuhost's PVE API client against a lab node: a token over HTTPS for ordinary keys, pvesh as root
over the verified SSH connection for root-only keys."""

import pytest

from gpuhost.errors import OperationFailed
from gpuhost.inventory.loader import load_inventory
from gpuhost.pve.api import root_only
from gpuhost.runner.connect import open_connection, pve_api

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("grub", "intel")], gpus=1)


@pytest.fixture
def api(lab):
    node = load_inventory(lab.inventory).nodes["pve1"]
    conn = open_connection(node)
    yield pve_api(node, conn)
    conn.close()


def test_root_only_registry():
    assert root_only("dev0") and root_only("args") and root_only("hostpci3", "0000:41:00.0,pcie=1")
    assert not root_only("hostpci0", "mapping=gpu0,pcie=1")
    assert not root_only("cores") and not root_only("memory")


def test_routes_and_tasks(api, lab):
    assert api.has_token
    assert api.route_for({"cores": 2}) == "token"
    assert api.route_for({"dev0": "/dev/nvidia0,gid=44"}) == "root"
    template = api.call("get", "nodes/pve1/storage/local/content", {"content": "vztmpl"})[0]["volid"]
    upid = api.call(
        "post",
        "nodes/pve1/lxc",
        {"vmid": 321, "ostemplate": template, "hostname": "apitest", "rootfs": "local-lvm:4", "unprivileged": 0},
    )
    assert upid.startswith("UPID:pve1:") and "root@pam!gpuhost" in upid  # created with the token
    api.wait_task(upid)
    api.call("put", "nodes/pve1/lxc/321/config", {"dev0": "/dev/zero,gid=44", "cores": 2})  # as root
    conf = lab.run("pve1", "cat /etc/pve/lxc/321.conf").stdout
    assert "dev0: /dev/zero,gid=44" in conf and "cores: 2" in conf


def test_pve_errors_are_clear_and_carry_no_secret(api, lab):
    with pytest.raises(OperationFailed) as info:
        api.call("get", "nodes/pve1/lxc/99999/config")
    assert "does not exist" in str(info.value)
    assert lab.token("pve1") not in str(info.value)
