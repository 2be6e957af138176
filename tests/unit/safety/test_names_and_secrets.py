"""Names that become paths, shell words or unit lines, and secrets, are checked at load (issue 31, item 2).

A profile name with ``$(…)``, a newline or ``..``, a node name with a newline, an API key with a newline or
another control character: each is exit 2 naming file, line and field, before any host is contacted. The env
file's template writes the key through quoting: whatever the key, the file has one line for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.errors import SecretError
from gpuhost.secrets import read_secret
from gpuhost.templating import Templates
from tests.unit.cli.test_malformed_input import Listener, _run, _write, inventory_text

PROFILE = """\
profiles:
  - name: {name}
    pins: {{sglang: "0.5.23", transformers: "5.19.0", cuda: 13}}
    model: nvidia/GLM-5-NVFP4
    architectures: [sm120]
    gpus: 1
    tp_size: 1
"""


@pytest.fixture(scope="module")
def listener() -> Listener:
    return Listener()


@pytest.mark.parametrize(
    "name",
    ['"p$(touch /root/gpuhost-pwned)"', '"p\\nExecStartPre=/bin/touch /root/gpuhost-pwned"', '"p..q"', '"../../etc"'],
    ids=["command-substitution", "newline", "dotdot", "parent"],
)
def test_unsafe_profile_name_in_a_profile_file_is_exit_2_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener, name: str
) -> None:
    profiles = _write(tmp_path, "profiles.yml", PROFILE.format(name=name))
    inv = inventory_text(
        listener.port,
        top=f"vars: {{sglang_profile_dirs: [{profiles}]}}\n",
        node_extra="    containers:\n      200: {serve: {profile: ok, model: /srv/m}}\n",
    )
    before = listener.accepted
    code, out = _run(capsys, ["launch", "sglang", "-i", str(_write(tmp_path, "inventory.yml", inv))])
    assert code == 2, out
    assert "profiles.yml:2" in out and "field 'profiles.0.name'" in out and "not a safe profile name" in out, out
    assert listener.accepted == before and "Traceback" not in out


def test_unsafe_profile_option_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    inv = inventory_text(
        listener.port, node_extra="    containers:\n      200: {serve: {profile: ok, model: /srv/m}}\n"
    )
    before = listener.accepted
    code, out = _run(
        capsys, ["launch", "sglang", "-i", str(_write(tmp_path, "inventory.yml", inv)), "--profile", "x$(id)"]
    )
    assert code == 2, out
    assert "sglang_profile" in out and "not a safe profile name" in out, out
    assert listener.accepted == before


def test_inventory_profile_name_with_dotdot_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    inv = inventory_text(listener.port, node_extra="    containers:\n      200: {serve: {profile: 'a..b'}}\n")
    code, out = _run(capsys, ["launch", "sglang", "-i", str(_write(tmp_path, "inventory.yml", inv))])
    assert code == 2, out
    assert "inventory.yml:6" in out and "field 'nodes.pve1.containers.200.serve.profile'" in out, out


def test_node_name_with_a_newline_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    inv = f'nodes:\n  "pve1\\nok  pve9":\n    address: 127.0.0.1\n    ssh: {{port: {listener.port}}}\n'
    book = _write(tmp_path, "play.yml", "- hosts: all\n  tasks: []\n")
    code, out = _run(capsys, ["run", str(book), "-i", str(_write(tmp_path, "inventory.yml", inv))])
    assert code == 2, out
    assert "inventory.yml:" in out and "not a safe node name" in out, out


@pytest.mark.parametrize("address", ["0.0.0.0", "'::'", "255.255.255.255", "224.0.0.1", "'ff02::1'", "300.1.1.1", "-x"])
def test_address_that_is_not_one_machine_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener, address: str
) -> None:
    inv = f"nodes:\n  pve1:\n    address: {address}\n    ssh: {{port: {listener.port}}}\n"
    book = _write(tmp_path, "play.yml", "- hosts: all\n  tasks: []\n")
    code, out = _run(capsys, ["run", str(book), "-i", str(_write(tmp_path, "inventory.yml", inv))])
    assert code == 2, out
    assert "inventory.yml:3" in out and "field 'nodes.pve1.address'" in out, out


@pytest.mark.parametrize(
    "key", ["k3y\nGPUHOST_INJ=pwned-by-key", "k3y\x1b]0;title\x07", "k3y\tx"], ids=["nl", "esc", "tab"]
)
def test_api_key_with_a_control_character_is_refused(tmp_path: Path, key: str) -> None:
    f = tmp_path / "key"
    f.write_text(key + "\n")
    f.chmod(0o600)
    with pytest.raises(SecretError, match="control character") as info:
        read_secret("serve API key", file=str(f))
    assert "pwned" not in str(info.value) and "title" not in str(info.value)


def test_env_file_template_writes_the_key_and_env_as_one_quoted_line_each() -> None:
    sglang = {"profile": "p", "api_key": 'ab"c$HOME`x\\', "env": {"NCCL_P2P_LEVEL": "NVL", "A": "two words"}}
    text = Templates().render_file("sglang.env.j2", {"sglang": sglang})
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == ["NCCL_P2P_LEVEL=NVL", 'A="two words"', 'SGLANG_API_KEY="ab\\"c\\$HOME\\`x\\\\"'], text


def test_env_file_template_refuses_a_value_with_a_newline() -> None:
    from gpuhost.errors import TemplateError

    sglang = {"profile": "p", "api_key": None, "env": {"A": "x\nLD_PRELOAD=/root/evil.so"}}
    with pytest.raises(TemplateError, match="control character"):
        Templates().render_file("sglang.env.j2", {"sglang": sglang})
