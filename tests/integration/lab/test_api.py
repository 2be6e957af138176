"""pvesh over SSH (root@pam) and the HTTPS API (tickets, tokens), with PVE's root-only rules,
through proxmoxer's https, ssh_paramiko and openssh backends."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import requests
from proxmoxer import ProxmoxAPI
from proxmoxer.core import ResourceException
from proxmoxer.tools import Tasks

from tests.lab_fixtures import LabHandle

TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
_IDS = itertools.count(700)


def _token_api(lab: LabHandle, node: str = "pve1") -> ProxmoxAPI:
    return ProxmoxAPI(
        lab.node(node).address,
        user="root@pam",
        token_name="gpuhost",
        token_value=lab.token(node),
        verify_ssl=str(lab.ca_file),
    )


def _ticket_api(lab: LabHandle, node: str = "pve1") -> ProxmoxAPI:
    return ProxmoxAPI(
        lab.node(node).address, user="root@pam", password=lab.root_password(), verify_ssl=str(lab.ca_file)
    )


def _vm(lab: LabHandle, node: str = "pve1") -> int:
    vmid = next(_IDS)
    assert lab.run(node, f"qm create {vmid} --name api{vmid} --memory 1024 --machine q35").rc == 0
    return vmid


def _ct(lab: LabHandle, node: str = "pve1") -> int:
    ctid = next(_IDS)
    assert lab.run(node, f"pct create {ctid} {TEMPLATE} --hostname api{ctid}").rc == 0
    return ctid


def test_pvesh_get_set_create_delete(lab: LabHandle) -> None:
    assert json.loads(lab.run("pve3", "pvesh get /version --output-format json").stdout)["version"] == "9.0.3"
    nodes = json.loads(lab.run("pve3", "pvesh get /nodes --output-format json").stdout)
    assert [n["node"] for n in nodes] == ["pve3"]
    ctid = next(_IDS)
    r = lab.run(
        "pve3",
        f"pvesh create /nodes/pve3/lxc -vmid {ctid} -ostemplate {TEMPLATE} -hostname p{ctid} --output-format json",
    )
    # the CLI runs the task synchronously: its log, then the UPID (pve-common RESTEnvironment.pm:442-529);
    # a Debian 12 CT without nesting ends WARNINGS: 1 (pve-container Setup/Base.pm check_systemd_nesting)
    *log, last = r.stdout.splitlines()
    upid = json.loads(last)
    assert r.rc == 0 and upid.startswith("UPID:pve3:") and f":vzcreate:{ctid}:root@pam:" in upid
    assert "WARN: Systemd 252 detected. You may need to enable nesting." in log
    assert r.stderr.strip().endswith("Task finished with 1 warning(s)!")
    task = json.loads(lab.run("pve3", f"pvesh get /nodes/pve3/tasks/{upid}/status --output-format json").stdout)
    assert (task["status"], task["exitstatus"]) == ("stopped", "WARNINGS: 1")
    assert lab.run("pve3", f"pvesh set /nodes/pve3/lxc/{ctid}/config -memory 1024").stdout == ""
    assert "memory: 1024" in lab.run("pve3", f"pct config {ctid}").stdout
    assert lab.run("pve3", f"pvesh delete /nodes/pve3/lxc/{ctid}").rc == 0
    assert lab.run("pve3", f"pct status {ctid}").rc == 2
    templates = json.loads(
        lab.run("pve3", "pvesh get /nodes/pve3/storage/local/content -content vztmpl --output-format json").stdout
    )
    assert [t["volid"] for t in templates] == [TEMPLATE]


def test_pvesh_as_root_may_set_root_only_keys(lab: LabHandle) -> None:
    vmid, ctid = _vm(lab), _ct(lab)
    lab.run("pve1", "test -e /dev/nvidia0 || mknod -m 666 /dev/nvidia0 c 195 0")
    r = lab.run(
        "pve1",
        f"pvesh set /nodes/pve1/qemu/{vmid}/config -hostpci0 0000:01:00.0,pcie=1 "
        f"-args '-set device.hostpci0.x-nv-gpudirect-clique=0' && "
        f"pvesh set /nodes/pve1/lxc/{ctid}/config -dev0 /dev/nvidia0,gid=44",
    )
    assert r.rc == 0, r.stderr
    r = lab.run("pve1", f"pvesh set /nodes/pve1/lxc/{ctid}/config -lxc.prlimit.memlock unlimited")
    assert r.rc == 255
    assert r.stderr.startswith("400 Parameter verification failed.\nlxc.prlimit.memlock: property is not defined")


def test_token_is_refused_root_only_keys_with_pve_messages(lab: LabHandle) -> None:
    api, vmid, ctid = _token_api(lab), _vm(lab), _ct(lab)
    lab.run("pve1", "test -e /dev/nvidia0 || mknod -m 666 /dev/nvidia0 c 195 0")
    api.nodes("pve1").qemu(vmid).config.put(memory="2048", machine="q35")  # ordinary keys: fine
    cases = [
        (
            api.nodes("pve1").qemu(vmid).config,
            {"hostpci0": "0000:01:00.0,pcie=1"},
            500,
            "only root can set 'hostpci0' config for non-mapped devices",
        ),
        (
            api.nodes("pve1").qemu(vmid).config,
            {"args": "-set device.hostpci0.x-nv-gpudirect-clique=0"},
            500,
            "only root can set 'args' config",
        ),
        (
            api.nodes("pve1").lxc(ctid).config,
            {"dev0": "/dev/nvidia0,gid=44"},
            403,
            "Permission check failed (configuring device passthrough is only allowed for root@pam)",
        ),
        (
            api.nodes("pve1").lxc(ctid).config,
            {"lxc.prlimit.memlock": "unlimited"},
            400,
            "Parameter verification failed.",
        ),
    ]
    for resource, params, status, message in cases:
        with pytest.raises(ResourceException) as info:
            resource.put(**params)
        assert info.value.status_code == status, params
        assert info.value.content == message, params
    assert "hostpci0" not in lab.run("pve1", f"qm config {vmid}").stdout
    assert "memory: 2048" in lab.run("pve1", f"qm config {vmid}").stdout


def test_root_ticket_may_set_root_only_keys(lab: LabHandle) -> None:
    api, vmid, ctid = _ticket_api(lab), _vm(lab), _ct(lab)
    lab.run("pve1", "test -e /dev/nvidia0 || mknod -m 666 /dev/nvidia0 c 195 0")
    api.nodes("pve1").qemu(vmid).config.put(
        hostpci0="0000:01:00.0,pcie=1", args="-set device.hostpci0.x-nv-gpudirect-clique=0"
    )
    api.nodes("pve1").lxc(ctid).config.put(dev0="/dev/nvidia0,gid=44")
    cfg = api.nodes("pve1").qemu(vmid).config.get()
    assert cfg["hostpci0"] == "0000:01:00.0,pcie=1" and len(cfg["digest"]) == 40
    assert api.nodes("pve1").lxc(ctid).config.get()["dev0"] == "/dev/nvidia0,gid=44"


def test_https_requires_authentication_and_a_valid_certificate(lab: LabHandle) -> None:
    url = f"https://{lab.node('pve1').address}:8006/api2/json/nodes"
    r = requests.get(url, verify=str(lab.ca_file), timeout=5)
    assert r.status_code == 401
    r = requests.get(
        url,
        verify=str(lab.ca_file),
        timeout=5,
        headers={"Authorization": "PVEAPIToken=root@pam!gpuhost=00000000-0000-0000-0000-000000000000"},
    )
    assert r.status_code == 401
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url, timeout=5)  # the lab CA is not a system CA
    with pytest.raises(Exception):  # noqa: B017 - proxmoxer raises its own AuthenticationError
        ProxmoxAPI(lab.node("pve1").address, user="root@pam", password="wrong", verify_ssl=str(lab.ca_file))


def test_tasks_over_https(lab: LabHandle) -> None:
    api, vmid = _token_api(lab, "pve2"), _vm(lab, "pve2")
    upid = api.nodes("pve2").qemu(vmid).status.start.post()
    status = Tasks.blocking_status(api, upid, timeout=10, polling_interval=0.05)
    assert status is not None and status["exitstatus"] == "OK"
    assert api.nodes("pve2").qemu(vmid).status.current.get()["status"] == "running"
    api.nodes("pve2").qemu(vmid).config.put(bios="ovmf")
    pending = {i["key"]: i for i in api.nodes("pve2").qemu(vmid).pending.get()}
    assert pending["bios"]["pending"] == "ovmf" and "value" not in pending["bios"]
    upid = api.nodes("pve2").qemu(vmid).status.stop.post()
    assert Tasks.blocking_status(api, upid, timeout=10, polling_interval=0.05)["exitstatus"] == "OK"


def test_proxmoxer_ssh_backends(lab: LabHandle, tmp_path: Path) -> None:
    vmid = _vm(lab)
    paramiko_api = ProxmoxAPI(
        lab.node("pve1").address, user="root", backend="ssh_paramiko", private_key_file=str(lab.client_key)
    )
    paramiko_api.nodes("pve1").qemu(vmid).config.put(args="-set device.hostpci0.x-nv-gpudirect-clique=0")
    assert paramiko_api.nodes("pve1").qemu(vmid).config.get()["args"].startswith("-set device.hostpci0")
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(
        f"Host *\n  UserKnownHostsFile {lab.known_hosts}\n  StrictHostKeyChecking yes\n"
        "  KexAlgorithms curve25519-sha256\n  BatchMode yes\n"
    )
    openssh_api = ProxmoxAPI(
        lab.node("pve1").address,
        user="root",
        backend="openssh",
        identity_file=str(lab.client_key),
        config_file=str(ssh_config),
    )
    openssh_api.nodes("pve1").qemu(vmid).config.put(hostpci0="0000:01:00.0,pcie=1")
    assert openssh_api.nodes("pve1").qemu(vmid).config.get()["hostpci0"] == "0000:01:00.0,pcie=1"
    with pytest.raises(ResourceException) as info:
        openssh_api.nodes("pve1").qemu(99999).config.get()
    assert "does not exist" in str(info.value)


def test_a_ticket_renews_itself(lab: LabHandle) -> None:
    url = f"https://{lab.node('pve1').address}:8006/api2/json/access/ticket"
    first = requests.post(
        url, data={"username": "root@pam", "password": lab.root_password()}, verify=str(lab.ca_file), timeout=5
    ).json()["data"]
    renewed = requests.post(
        url, data={"username": "root@pam", "password": first["ticket"]}, verify=str(lab.ca_file), timeout=5
    )
    assert renewed.status_code == 200 and renewed.json()["data"]["username"] == "root@pam"
    forged = requests.post(
        url,
        data={"username": "root@pam", "password": first["ticket"][:-4] + "AAAA"},
        verify=str(lab.ca_file),
        timeout=5,
    )
    assert forged.status_code == 401
