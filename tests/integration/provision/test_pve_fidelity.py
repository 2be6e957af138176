"""gpuhost's PVE client against a lab node that answers as Proxmox VE's own code does (each behaviour's
source is cited next to the lab's code): warnings that are success, pvesh's synchronous task output and
stderr warnings, delete+revert refused, qemu-server's stale-digest text, and the API certificate probe."""

import hashlib
import ssl

import pytest
from ruamel.yaml import YAML

from gpuhost.errors import OperationFailed
from gpuhost.inventory.loader import load_inventory
from gpuhost.pve import edit
from gpuhost.pve.api import PveApi
from gpuhost.runner.connect import open_connection, pve_api
from tests.integration.provision.conftest import gpuhost

pytestmark = pytest.mark.integration

NESTING = "Systemd 252 detected. You may need to enable nesting."


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("grub", "intel")], gpus=1)


@pytest.fixture
def node(lab):
    return load_inventory(lab.inventory).nodes["pve1"]


@pytest.fixture
def conn(node):
    c = open_connection(node)
    yield c
    c.close()


def template(api: PveApi) -> str:
    return api.call("get", "nodes/pve1/storage/local/content", {"content": "vztmpl"})[0]["volid"]


def test_token_route_task_ending_warnings_is_a_success_with_its_warning(node, conn, lab):
    api = pve_api(node, conn)
    assert api.has_token
    upid = api.call(
        "post",
        "nodes/pve1/lxc",
        {"vmid": 301, "ostemplate": template(api), "hostname": "warn", "rootfs": "local-lvm:4", "unprivileged": 0},
    )
    outcome = api.wait_task(upid)
    assert outcome is not None and outcome.exitstatus == "WARNINGS: 1"
    assert outcome.warnings == (NESTING,)
    assert "301.conf" in lab.run("pve1", "ls /etc/pve/lxc").stdout


def test_root_route_reads_pvesh_synchronous_task_output(conn, lab):
    root = PveApi(conn)  # no token: every call is pvesh as root
    api_template = template(root)
    upid = root.call(
        "post",
        "nodes/pve1/lxc",
        {"vmid": 302, "ostemplate": api_template, "hostname": "sync", "rootfs": "local-lvm:4", "unprivileged": 0},
    )
    assert isinstance(upid, str) and upid.startswith("UPID:pve1:")
    outcome = root.wait_task(upid)
    assert outcome is not None and outcome.warnings == (NESTING,)
    assert root.take_warnings() == ["Task finished with 1 warning(s)!"]
    # a failed task (the CT exists) is a failure, though pvesh exits 0 and prints the UPID
    again = root.call(
        "post",
        "nodes/pve1/lxc",
        {"vmid": 302, "ostemplate": api_template, "hostname": "sync", "rootfs": "local-lvm:4", "unprivileged": 0},
    )
    with pytest.raises(OperationFailed) as info:
        root.wait_task(again)
    assert "unable to create CT 302: config file already exists" in str(info.value)


def test_root_route_stderr_warnings_do_not_fail_an_applied_change(conn, lab):
    root = PveApi(conn)
    lab.run("pve1", "pct create 303 local:vztmpl/$(ls /var/lib/vz/template/cache | head -1) --hostname v1 >/dev/null")
    lab.run("pve1", "echo 'lxc.cgroup.devices.allow: c 195:* rwm' >> /etc/pve/lxc/303.conf")
    root.call("put", "nodes/pve1/lxc/303/config", {"cores": 3, "delete": "cpulimit"})
    assert "cores: 3" in lab.run("pve1", "cat /etc/pve/lxc/303.conf").stdout
    warnings = root.take_warnings()
    assert "vm 303 - lxc.cgroup.devices.allow is deprecated, this will be a hard error in the future!" in warnings
    assert "cannot delete 'cpulimit' - not set in current configuration!" in warnings


def test_delete_and_revert_of_one_key_in_one_call_is_refused(conn, lab):
    root = PveApi(conn)
    lab.run("pve1", "pct create 304 local:vztmpl/$(ls /var/lib/vz/template/cache | head -1) --hostname v2 >/dev/null")
    with pytest.raises(OperationFailed) as info:
        root.call("put", "nodes/pve1/lxc/304/config", {"delete": "onboot", "revert": "onboot"})
    assert "you can't use '-delete onboot' and '-revert onboot' at the same time" in str(info.value)


def test_vm_stale_digest_is_recognised(node, conn, lab):
    api = pve_api(node, conn)
    api.wait_task(api.call("post", "nodes/pve1/qemu", {"vmid": 305, "memory": 1024}))
    with pytest.raises(OperationFailed) as info:
        api.call("put", "nodes/pve1/qemu/305/config", {"cores": 2, "digest": "0" * 40})
    assert "checksum mismatch (file change by other user?)" in str(info.value)
    assert edit.is_modified_error(str(info.value))


def _inventory_without_ca(lab, tmp_path, fingerprint: str | None = None):
    yaml = YAML()
    doc = yaml.load(lab.inventory.read_text())
    for node in doc["nodes"].values():
        del node["api"]["ca_file"]
        if fingerprint is not None:
            node["api"]["fingerprint"] = fingerprint
        for section, key in (("ssh", "key_file"), ("ssh", "known_hosts_file"), ("api", "token_secret_file")):
            node[section][key] = str(lab.inventory.parent / node[section][key])
    path = tmp_path / f"no-ca-{fingerprint is not None}.yml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def test_api_certificate_is_checked_before_any_change(lab, tmp_path):
    watched = "cat /etc/kernel/cmdline /etc/default/grub; ls /etc/modprobe.d /etc/modules-load.d"
    before = lab.run("pve1", watched).stdout
    r = gpuhost("provision", "host", "-i", str(_inventory_without_ca(lab, tmp_path)), "-e", "gpu_path=none")
    assert r.returncode == 2, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "certificate verify failed" in out and "Nothing was changed" in out
    assert "/etc/pve/pve-root-ca.pem" in out and "nodes.pve1.api.ca_file" in out
    assert lab.run("pve1", watched).stdout == before
    # with the node's CA in api.ca_file (the lab inventory has it) the same run proceeds
    ok = gpuhost("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=none", "--check")
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_a_new_dev_on_a_running_container_is_hot_plugged(conn, lab):
    root = PveApi(conn)
    lab.run(
        "pve1",
        "mknod -m 666 /dev/hotplug0 c 1 3"  # a device node on the node that the CT does not have
        " && pct create 306 local:vztmpl/$(ls /var/lib/vz/template/cache | head -1) --hostname hp >/dev/null"
        " && pct start 306 >/dev/null 2>&1",
    )
    assert lab.run("pve1", "pct exec 306 -- test -c /dev/hotplug0").rc != 0
    root.call("put", "nodes/pve1/lxc/306/config", {"dev0": "/dev/hotplug0,gid=44"})
    conf = lab.run("pve1", "cat /etc/pve/lxc/306.conf").stdout
    assert "dev0: /dev/hotplug0,gid=44" in conf and "[pve:pending]" not in conf
    assert lab.run("pve1", "pct exec 306 -- test -c /dev/hotplug0").rc == 0


def test_a_token_missing_an_acl_is_told_so_and_never_escalated_to_root(node, conn, lab):
    lab.run("pve1", "pct create 307 local:vztmpl/$(ls /var/lib/vz/template/cache | head -1) --hostname acl >/dev/null")
    before = lab.run("pve1", "cat /etc/pve/user.cfg").stdout
    # privilege separation on, and only PVEAuditor on /vms (pveum acl modify /vms --tokens … --roles PVEAuditor)
    lab.run(
        "pve1",
        "sed -i 's/^token:root@pam!gpuhost:0:0::$/token:root@pam!gpuhost:0:1::/' /etc/pve/user.cfg"
        " && echo 'acl:1:/vms:root@pam!gpuhost:PVEAuditor:' >> /etc/pve/user.cfg",
    )
    try:
        api = pve_api(node, conn)
        assert api.call("get", "nodes/pve1/lxc/307/config")["hostname"] == "acl"  # VM.Audit: allowed
        with pytest.raises(OperationFailed) as info:
            api.call("put", "nodes/pve1/lxc/307/config", {"cores": 2})
        text = str(info.value)
        assert "Permission check failed (/vms/307, VM.Config.CPU)" in text
        assert "the API token lacks VM.Config.CPU on /vms/307" in text and "pveum acl modify /vms/307" in text
        assert "cores: 2" not in lab.run("pve1", "cat /etc/pve/lxc/307.conf").stdout  # not written as root
    finally:
        lab.run("pve1", f"cat > /etc/pve/user.cfg <<'EOF'\n{before}EOF")


def test_a_pinned_certificate_fingerprint_replaces_ca_file(lab, node, tmp_path):
    host, port = node.api.url.removeprefix("https://").rsplit(":", 1)
    der = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((host, int(port))))
    right = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
    ok = gpuhost(
        "provision", "host", "-i", str(_inventory_without_ca(lab, tmp_path, right)), "-e", "gpu_path=none", "--check"
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = ":".join(["00"] * 32)
    r = gpuhost(
        "provision", "host", "-i", str(_inventory_without_ca(lab, tmp_path, wrong)), "-e", "gpu_path=none", "--check"
    )
    assert r.returncode == 2 and "its fingerprint is not api.fingerprint" in r.stdout + r.stderr
