"""Files into and out of a lab container through PctConnection (pct push/pull), and PVE's refusals."""

from __future__ import annotations

import hashlib
import itertools
import os
import shlex

import pytest

from gpuhost.connection.pct import PctConnection
from gpuhost.connection.shipped_tool import run_tool
from gpuhost.connection.ssh import SSHConnection, SSHSettings
from gpuhost.errors import CommandFailed
from tests.lab_fixtures import LabHandle

TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
_CTIDS = itertools.count(700)


def _node(lab: LabHandle, name: str = "pve2") -> SSHConnection:
    return SSHConnection(
        name,
        SSHSettings(
            address=lab.node(name).address, key_file=str(lab.client_key), known_hosts_file=str(lab.known_hosts)
        ),
    )


@pytest.fixture
def ct(lab: LabHandle):
    ctid = next(_CTIDS)
    r = lab.run("pve2", f"pct create {ctid} {TEMPLATE} --hostname ct{ctid} --rootfs local-lvm:8 --start 1")
    assert r.rc == 0, r.stderr
    node = _node(lab)
    yield PctConnection(node, ctid)
    node.close()
    lab.run("pve2", f"pct stop {ctid}; pct destroy {ctid}")


def _node_temps(lab: LabHandle) -> str:
    return lab.run("pve2", "ls -d /tmp/gpuhost-* 2>/dev/null || true").stdout


def test_put_get_round_trip_through_pct_push_and_pull(lab: LabHandle, ct: PctConnection, tmp_path) -> None:
    data = os.urandom(3 << 20)
    digest = hashlib.sha256(data).hexdigest()
    r = ct.put_file("/root/installer.run", data, mode=0o755, sha256=digest)
    assert r.sent
    assert ct.run("stat -c %a /root/installer.run").stdout.strip() == "755"
    assert ct.run("sha256sum /root/installer.run").stdout.split()[0] == digest
    again = ct.put_file("/root/installer.run", data, mode=0o755, sha256=digest)
    assert (again.sent, again.changed) == (False, False)
    assert ct.get_file("/root/installer.run") == data
    assert ct.get_file("/root/installer.run", tmp_path / "back").read_bytes() == data
    assert ct.run("ls -a /root | grep gpuhost- || true").stdout == ""
    assert _node_temps(lab) == ""


def test_checksum_mismatch_in_the_ct_leaves_nothing(lab: LabHandle, ct: PctConnection) -> None:
    ct.run("echo original > /root/app.conf")
    with pytest.raises(CommandFailed, match="checksum mismatch"):
        ct.put_file("/root/app.conf", b"replacement\n", sha256="0" * 64)
    assert ct.read_file("/root/app.conf") == "original\n"
    assert ct.run("ls -a /root | grep gpuhost- || true").stdout == ""
    assert _node_temps(lab) == ""


def test_write_file_and_shipped_tool_in_a_ct(lab: LabHandle, ct: PctConnection) -> None:
    ct.write_file("/root/secret", "token\n", mode=0o600)
    assert ct.run("stat -c %a /root/secret").stdout.strip() == "600"
    out = run_tool(
        ct.node, b"import json, socket; print(json.dumps({'host': socket.gethostname()}))", name="t.py", ctid=ct.ctid
    )
    assert out.data == {"host": f"ct{ct.ctid}"}
    assert ct.run("ls -d /tmp/gpuhost-* 2>/dev/null || true").stdout == ""


def test_hostname_with_a_newline_is_refused_like_pve(lab: LabHandle) -> None:
    ctid = next(_CTIDS)
    bad = shlex.quote("ct\nevil")
    r = lab.run("pve2", f"pct create {ctid} {TEMPLATE} --hostname {bad} --rootfs local-lvm:8")
    assert r.rc == 255
    assert r.stderr.startswith(
        "400 Parameter verification failed.\nhostname: invalid format - value does not look like a valid DNS name\n"
    ), r.stderr
    assert lab.run("pve2", f"pct status {ctid}").rc != 0, "nothing was created"
    r = lab.run("pve2", f"pct create {ctid} {shlex.quote('local:vztmpl/../../../etc/shadow.tar.zst')}")
    assert r.rc == 255 and "unable to parse directory volume name" in r.stderr
    r = lab.run("pve2", f"pct create {ctid} {TEMPLATE} --rootfs {shlex.quote('local-lvm:8;touch /tmp/pwned')}")
    assert r.rc == 255 and "unable to parse lvm volume name" in r.stderr
    assert lab.run("pve2", "test -e /tmp/pwned || echo clean").stdout == "clean\n"
    r = lab.run("pve2", f"qm set 100 --name {bad}")
    assert r.rc == 255 and "name: invalid format - value does not look like a valid DNS name" in r.stderr
