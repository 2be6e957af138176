"""Bad input of every kind exits 2 naming file, line and field, prints no traceback, and contacts no host.

Every inventory here points its node at a TCP listener on loopback that counts connection attempts:
after each command it must have seen none.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost.cli.app import main
from tests.support.listener import Listener

GOOD_PIN = (
    "{version: 580.95.05, url: 'https://example.invalid/NVIDIA-Linux-x86_64-580.95.05.run', sha256: " + "a" * 64 + "}"
)
TOKEN_VALUE = "8f2a1c1e-5b7d-4c2a-9f11-0d3c5e7a9b21"


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


def inventory_text(port: int, node_extra: str = "", top: str = "", node_vars: str = "") -> str:
    text = (
        f"{top}nodes:\n  pve1:\n    address: 127.0.0.1\n    ssh: {{port: {port}, key_file: /nonexistent}}\n{node_extra}"
    )
    if node_vars:
        text += f"    vars:\n{node_vars}"
    return text


PLAY_OK = "- hosts: all\n  tasks:\n    - copy: {dest: /tmp/x, content: y}\n"

# (id, inventory text or callable(port), playbook text or None (provision host), extra args, expected where, field)
CASES: list[tuple[str, str, str | None, list[str], str, str | None]] = [
    (
        "inv-unknown-ssh-field",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    ssh: {host_key_polcy: strict}\n",
        PLAY_OK,
        [],
        "inventory.yml:4",
        "nodes.pve1.ssh.host_key_polcy",
    ),
    ("inv-empty-address", "nodes:\n  pve1:\n    address: ''\n", PLAY_OK, [], "inventory.yml:3", "nodes.pve1.address"),
    (
        "inv-bad-address",
        "nodes:\n  pve1:\n    address: 'a b;c'\n",
        PLAY_OK,
        [],
        "inventory.yml:3",
        "nodes.pve1.address",
    ),
    (
        "inv-port-range",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    ssh: {port: 70000}\n",
        PLAY_OK,
        [],
        "inventory.yml:4",
        "nodes.pve1.ssh.port",
    ),
    ("inv-nodes-list", "nodes:\n  - pve1\n  - pve2\n", PLAY_OK, [], "inventory.yml:", "nodes"),
    ("inv-node-list", "nodes:\n  pve1: [127.0.0.1]\n", PLAY_OK, [], "inventory.yml:2", "nodes.pve1"),
    (
        "inv-duplicate-key",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    address: 127.0.0.2\n",
        PLAY_OK,
        [],
        "inventory.yml:4",
        None,
    ),
    (
        "inv-secret-in-env-field",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    api: {url: 'https://127.0.0.1:8006',"
        f" token_id: 'root@pam!gh', token_secret_env: '{TOKEN_VALUE}'}}\n",
        PLAY_OK,
        [],
        "inventory.yml:4",
        "nodes.pve1.api.token_secret_env",
    ),
    (
        "inv-inline-password",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    ssh: {password: hunter2}\n",
        PLAY_OK,
        [],
        "inventory.yml:4",
        "nodes.pve1.ssh",
    ),
    (
        "inv-ctid-range",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    containers:\n      50: {}\n",
        PLAY_OK,
        [],
        "inventory.yml:",
        "nodes.pve1.containers",
    ),
    (
        "inv-hostname-newline",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    containers:\n      200: "
        '{hostname: "llm\\nlxc.apparmor.profile: unconfined"}\n',
        PLAY_OK,
        [],
        "inventory.yml:5",
        "nodes.pve1.containers.200.hostname",
    ),
    (
        "inv-template-dotdot",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    containers:\n      200: "
        "{template: 'local:vztmpl/../../etc/x.tar.zst'}\n",
        PLAY_OK,
        [],
        "inventory.yml:5",
        "nodes.pve1.containers.200.template",
    ),
    (
        "inv-rootfs-injection",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    containers:\n      200: {rootfs: 'local-lvm:8; touch /pwned'}\n",
        PLAY_OK,
        [],
        "inventory.yml:5",
        "nodes.pve1.containers.200.rootfs",
    ),
    (
        "inv-net0-bad",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    containers:\n      200: {net0: 'name=eth0,bridge=$(reboot)'}\n",
        PLAY_OK,
        [],
        "inventory.yml:5",
        "nodes.pve1.containers.200.net0",
    ),
    (
        "inv-gpus-word",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    containers:\n      200: {gpus: some}\n",
        PLAY_OK,
        [],
        "inventory.yml:5",
        "nodes.pve1.containers.200.gpus",
    ),
    (
        "inv-group-unknown-node",
        "nodes:\n  pve1: {address: 127.0.0.1}\ngroups:\n  g: {nodes: [pve9]}\n",
        PLAY_OK,
        [],
        "inventory.yml:4",
        "groups.g.nodes",
    ),
    (
        "inv-multinode-member-without-serve",
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    containers:\n      200: {serve: {profile: p, host: 127.0.0.2}}\n"
        "serving:\n  groups:\n    big:\n      replicas:\n"
        "        - members: [{node: pve1, ctid: 200}, {node: pve1, ctid: 201}]\n",
        PLAY_OK,
        [],
        "inventory.yml:11",  # the ssh line the test adds at the node's end comes before it
        "serving.groups.big.replicas.0.members.1.ctid",
    ),
    ("inv-yaml-syntax", "nodes:\n  pve1: {address: 127.0.0.1\n", PLAY_OK, [], "inventory.yml:", None),
    (
        "inv-alias-bomb",
        "a: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\nnodes: {pve1: {address: 127.0.0.1}}\n",
        PLAY_OK,
        [],
        "inventory.yml:2",
        None,
    ),
    (
        "inv-unknown-tag",
        "nodes:\n  pve1: !!python/object:os.system {address: 127.0.0.1}\n",
        PLAY_OK,
        [],
        "inventory.yml:2",
        None,
    ),
]

# typed role variables (inventory, group, play, role and -e layers), provision host's playbook
VAR_CASES: list[tuple[str, str, str | None, list[str], str, str | None]] = [
    ("var-gpu-path-inventory", "vars: {gpu_path: lx}\n", None, [], "inventory.yml:1", "gpu_path"),
    ("var-gpu-path-node", "NODEVARS      gpu_path: lx\n", None, [], "inventory.yml:6", "gpu_path"),
    (
        "var-gpu-path-group",
        "groups:\n  g:\n    nodes: [pve1]\n    vars: {gpu_path: 3}\n",
        None,
        [],
        "inventory.yml:8",
        "gpu_path",
    ),
    (
        "var-driver-version",
        f"vars: {{gpu_path: lxc, nvidia_driver: {GOOD_PIN.replace('580.95.05,', 'abc,', 1)}}}\n",
        None,
        [],
        "inventory.yml:1",
        "nvidia_driver.version",
    ),
    (
        "var-driver-sha",
        "vars: {gpu_path: lxc, nvidia_driver: {version: 580.95.05, url: 'https://x.invalid/a.run', sha256: nope}}\n",
        None,
        [],
        "inventory.yml:1",
        "nvidia_driver.sha256",
    ),
    (
        "var-driver-url",
        f"vars: {{gpu_path: lxc, nvidia_driver: {{version: 580.95.05, url: 'ftp://x/a.run', sha256: {'b' * 64}}}}}\n",
        None,
        [],
        "inventory.yml:1",
        "nvidia_driver.url",
    ),
    ("var-driver-missing", "vars: {gpu_path: lxc}\n", None, [], "", "nvidia_driver"),
    (
        "var-cmdline-string",
        "vars: {gpu_path: none, cmdline_extra: 'a b'}\n",
        None,
        [],
        "inventory.yml:1",
        "cmdline_extra",
    ),
    (
        "var-cmdline-token",
        "vars: {gpu_path: none, cmdline_extra: ['a;reboot']}\n",
        None,
        [],
        "inventory.yml:1",
        "cmdline_extra",
    ),
    ("var-vfio-ids", "vars: {gpu_path: vm, vfio_ids: [nvidia]}\n", None, [], "inventory.yml:1", "vfio_ids"),
    ("var-grub-dropin", "vars: {gpu_path: none, grub_dropin: maybe}\n", None, [], "inventory.yml:1", "grub_dropin"),
    ("var-e-gpu-path", "", None, ["-e", "gpu_path=lx"], "-e:1", "gpu_path"),
    ("var-e-second", "", None, ["-e", "gpu_path=none", "-e", "uvm_disable_hmm=[1]"], "-e:2", "uvm_disable_hmm"),
    ("var-e-malformed", "", None, ["-e", "novalue"], "-e:1", "novalue"),
    (
        "var-play-vars",
        "",
        "- hosts: all\n  vars: {gpu_path: vmm}\n  roles: [proxmox_host]\n",
        [],
        "play.yml:2",
        "gpu_path",
    ),
    (
        "var-role-vars",
        "",
        "- hosts: all\n  roles:\n    - {role: proxmox_host, vars: {gpu_path: none, iommu_vendor_token: sometimes}}\n",
        [],
        "play.yml:3",
        "iommu_vendor_token",
    ),
]

PLAY_CASES: list[tuple[str, str, str | None, list[str], str, str | None]] = [
    ("pb-unknown-op", "", "- hosts: all\n  tasks:\n    - lineinfile: {path: /a}\n", [], "play.yml:3", "lineinfile"),
    (
        "pb-unknown-arg",
        "",
        "- hosts: all\n  tasks:\n    - copy: {dest: /a, content: x, own: root}\n",
        [],
        "play.yml:3",
        "copy.own",
    ),
    (
        "pb-two-ops",
        "",
        "- hosts: all\n  tasks:\n    - {copy: {dest: /a, content: x}, command: y}\n",
        [],
        "play.yml:3",
        None,
    ),
    ("pb-play-list", "", "- [hosts, all]\n", [], "play.yml:1", None),
    ("pb-no-hosts", "", "- tasks: []\n", [], "play.yml:1", "hosts"),
    ("pb-unknown-play-field", "", "- hosts: all\n  taks: []\n", [], "play.yml:2", "taks"),
    ("pb-unknown-role", "", "- hosts: all\n  roles: [nope]\n", [], "play.yml:2", "roles"),
    ("pb-unknown-group", "", "- hosts: gpu_nodes\n  tasks: []\n", [], "play.yml:1", "hosts"),
    (
        "pb-notify-unknown",
        "",
        "- hosts: all\n  tasks:\n    - copy: {dest: /a, content: x}\n      notify: nope\n",
        [],
        "play.yml:3",
        "notify",
    ),
    (
        "pb-handler-twice",
        "",
        "- hosts: all\n  handlers:\n    - {name: h, command: a}\n    - {name: h, command: b}\n",
        [],
        "play.yml:4",
        "name",
    ),
    (
        "pb-role-handler-clash",
        "",
        "- hosts: all\n  vars: {gpu_path: none}\n  roles: [proxmox_host]\n  handlers:\n"
        "    - {name: update initramfs, command: a}\n",
        [],
        "play.yml:",
        "handlers",
    ),
    (
        "pb-template-missing",
        "",
        "- hosts: all\n  tasks:\n    - template: {src: nope.j2, dest: /a}\n",
        [],
        "play.yml:3",
        "template.src",
    ),
    (
        "pb-template-undefined-var",
        "",
        "- hosts: all\n  tasks:\n    - template: {src: vfio.conf.j2, dest: /a}\n",
        [],
        "play.yml:3",
        "template.src",
    ),
    (
        "pb-arg-undefined-var",
        "",
        "- hosts: all\n  tasks:\n    - copy: {dest: /a, content: '{{ nope }}'}\n",
        [],
        "play.yml:3",
        "copy",
    ),
    (
        "pb-arg-renders-bad",
        "",
        "- hosts: all\n  vars: {m: rw}\n  tasks:\n    - copy: {dest: /a, content: x, mode: '{{ m }}'}\n",
        [],
        "play.yml:4",
        "copy.mode",
    ),
    (
        "pb-arg-secret-unset",
        "",
        "- hosts: all\n  tasks:\n    - copy: {dest: /a, content: \"{{ secret_env('GPUHOST_TEST_UNSET_SECRET') }}\"}\n",
        [],
        "play.yml:3",
        "copy",
    ),
    ("pb-var-undefined", "", "- hosts: all\n  vars: {a: '{{ b }}'}\n  tasks: []\n", [], "play.yml:2", "a"),
    (
        "pb-tags-mapping",
        "",
        "- hosts: all\n  tasks:\n    - copy: {dest: /a, content: x}\n      tags: {a: 1}\n",
        [],
        "play.yml:4",
        "tags",
    ),
    ("pb-bad-bytes", "", "- hosts: all\n  name: caf\xe9\n", [], "play.yml:3", None),
    ("pb-nul", "", "- hosts: all\n\x00\n", [], "play.yml:2", None),
    ("pb-syntax", "", "- hosts: [all\n", [], "play.yml:", None),
]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    if "\xe9" in text:
        p.write_bytes(text.replace("\xe9", "").encode() + b"\xe9\n")
    else:
        p.write_text(text)
    return p


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out + out.err


@pytest.mark.parametrize(
    ("inv", "book", "extra", "where", "field"),
    [c[1:] for c in CASES + VAR_CASES + PLAY_CASES],
    ids=[c[0] for c in CASES + VAR_CASES + PLAY_CASES],
)
def test_bad_input_exits_2_with_file_line_and_field_and_contacts_no_host(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    listener: Listener,
    inv: str,
    book: str | None,
    extra: list[str],
    where: str,
    field: str | None,
) -> None:
    port = listener.port
    if inv.startswith("nodes:"):
        inv_text = inv
        if "ssh:" not in inv and "address: 127.0.0.1\n" in inv:  # at the node's end: earlier lines stay put
            end = re.search(r"^(?:groups|serving):", inv, re.M)
            cut = end.start() if end else len(inv)
            inv_text = inv[:cut] + f"    ssh: {{port: {port}}}\n" + inv[cut:]
    elif inv.startswith("NODEVARS"):
        inv_text = inventory_text(port, node_vars=inv.removeprefix("NODEVARS") + "\n")
    elif inv.startswith("groups:"):
        inv_text = inventory_text(port) + inv
    else:
        inv_text = inventory_text(port, top=inv)
    inventory = _write(tmp_path, "inventory.yml", inv_text)
    before = listener.accepted
    if book is None:
        argv = ["provision", "host", "-i", str(inventory), *extra]
    else:
        argv = ["run", str(_write(tmp_path, "play.yml", book)), "-i", str(inventory), *extra]
    code, output = _run(capsys, argv)
    assert code == 2, output
    assert "Traceback" not in output
    assert listener.accepted == before, "a host was contacted"
    if where:
        assert where in output, output
        if where.endswith(":"):
            assert re.search(re.escape(where) + r"\d+", output), output
    if field:
        assert f"field '{field}" in output, output
    assert TOKEN_VALUE not in output
    assert "hunter2" not in output


MULTINODE_PROFILE = """\
profiles:
  - name: tp2-2node
    pins: {sglang: "0.5.23", transformers: "5.19.0", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 1
    tp_size: 2
    multinode: {nnodes: 3, socket_ifname: lo}
"""


def test_a_multinode_replica_its_profile_does_not_span_is_refused_before_any_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    profiles = _write(tmp_path, "profiles.yml", MULTINODE_PROFILE)
    serve = "{serve: {profile: tp2-2node, model: /srv/m, host: 127.0.0.2}}"
    inv = inventory_text(
        listener.port,
        top=f"vars: {{sglang_profile_dirs: [{profiles}]}}\n",
        node_extra=f"    containers:\n      200: {serve}\n      201: {serve}\n",
    ) + (
        "serving:\n  groups:\n    big:\n      replicas:\n        - members: [{node: pve1, ctid: 200}, {node: pve1, ctid: 201}]\n"
    )
    before = listener.accepted
    code, output = _run(capsys, ["launch", "sglang", "-i", str(_write(tmp_path, "inventory.yml", inv))])
    assert code == 2, output
    assert "inventory.yml:13" in output and "field 'serving.groups.big.replicas.0.members'" in output, output
    assert "profile tp2-2node has multinode.nnodes 3, the replica has 2 members" in output
    assert "Traceback" not in output
    assert listener.accepted == before, "a host was contacted"


def test_ctid_not_in_inventory_is_refused_before_any_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    inv = inventory_text(
        listener.port,
        top=f"vars: {{nvidia_driver: {GOOD_PIN}}}\n",
        node_extra="    containers:\n      200: {hostname: llm}\n",
    )
    before = listener.accepted
    code, output = _run(
        capsys, ["provision", "lxc", "-i", str(_write(tmp_path, "inventory.yml", inv)), "--ctid", "999"]
    )
    assert code == 2, output
    assert "error: --ctid: field 'lxc_ctids': CT 999 is not among the node's containers (200)" in output, output
    assert listener.accepted == before


@pytest.mark.parametrize(
    ("argv", "printed"),
    [
        # each error names the flag the operator typed (they once printed --ctids, --sglang_group, --vm_vmids)
        (["provision", "lxc", "--ctid", "999"], "error: --ctid: field 'lxc_ctids': CT 999 is not among"),
        (["verify", "lxc", "--ctid", "999"], "error: --ctid: field 'lxc_ctids': CT 999 is not among"),
        (["launch", "sglang", "--ctid", "999"], "error: nothing to launch: no container among --ctid 999"),
        (["launch", "sglang", "--group", "nope"], "error: --group: field 'sglang_group': no serving group 'nope'"),
        (["provision", "vm", "--vmid", "7"], "error: --vmid: field 'vm_vmids': VM 7 is not among the node's vms"),
    ],
)
def test_an_error_about_a_command_flag_names_the_flag_as_typed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener, argv: list[str], printed: str
) -> None:
    inv = inventory_text(
        listener.port,
        top=f"vars: {{nvidia_driver: {GOOD_PIN}}}\n",
        node_extra="    containers:\n      200: {hostname: llm}\n",
    )
    before = listener.accepted
    code, output = _run(capsys, [*argv[:2], "-i", str(_write(tmp_path, "inventory.yml", inv)), *argv[2:]])
    assert code == 2, output
    assert printed in output, output
    assert listener.accepted == before


def test_secret_file_readable_by_others_names_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN_VALUE)
    secret.chmod(0o644)
    inv = inventory_text(
        listener.port,
        node_extra=f"    api: {{url: 'https://127.0.0.1:8006', token_id: 'root@pam!g', token_secret_file: {secret}}}\n",
    )
    code, output = _run(
        capsys, ["run", str(_write(tmp_path, "play.yml", PLAY_OK)), "-i", str(_write(tmp_path, "inventory.yml", inv))]
    )
    assert code == 2 and "inventory.yml:5" in output and "field 'nodes.pve1.api.token_secret_file'" in output
    assert "chmod 600" in output and TOKEN_VALUE not in output


@pytest.mark.parametrize("content", [b"\xff\xfe", b"", b"tok\x00en"])
def test_unusable_secret_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener, content: bytes
) -> None:
    secret = tmp_path / "token"
    secret.write_bytes(content)
    secret.chmod(0o600)
    inv = inventory_text(
        listener.port,
        node_extra=f"    api: {{url: 'https://127.0.0.1:8006', token_id: 'root@pam!g', token_secret_file: {secret}}}\n",
    )
    code, output = _run(
        capsys, ["run", str(_write(tmp_path, "play.yml", PLAY_OK)), "-i", str(_write(tmp_path, "inventory.yml", inv))]
    )
    assert code == 2 and "inventory.yml:5" in output and "token_secret_file" in output, output
    assert "Traceback" not in output
    assert listener.accepted == 0, "a host was contacted"
