"""Secret-looking lines never reach a bundle; ``--anonymise`` replaces names and addresses, the same way in
every file, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.capture.scrub import SCRUBBED, Anonymiser, scrub_secrets
from gpuhost.redact import forget_all, register_secret

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(
    "line",
    [
        "#my hub token%3A hf_token=hf_PlantedCaptureSecret0123456789abcdef",  # a PVE description line, %-escaped
        "#hf_PlantedCaptureSecret0123456789abcdef",
        "Authorization: PVEAPIToken=root@pam!gpuhost=0b6e3f0a-1d2c-4e5f-8a9b-0c1d2e3f4a5b",
        "root@pam!gpuhost=0b6e3f0a-1d2c-4e5f-8a9b-0c1d2e3f4a5b",
        "password=hunter2hunter2",
        "lxc.environment: OPENAI_API_KEY=sk-plantedplantedplantedplanted",
        "ExecStart=/usr/bin/sglang --api-key s3cr3t-value",
    ],
)
def test_a_secret_looking_line_is_removed_whole(line: str) -> None:
    text, removed = scrub_secrets(f"cores: 4\n{line}\nmemory: 8192\n")
    assert (text, removed) == (f"cores: 4\n{SCRUBBED}\nmemory: 8192\n", 1)


def test_a_private_key_block_is_removed_to_its_end() -> None:
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAAAAAB\n-----END OPENSSH PRIVATE KEY-----\n"
    text, removed = scrub_secrets("before\n" + pem + "after\n")
    assert removed == 4
    assert text == "before\n" + f"{SCRUBBED}\n" * 4 + "after\n"


def test_a_registered_secret_is_masked_anywhere() -> None:
    register_secret("Xy9-registered-value")
    try:
        text, _ = scrub_secrets("net0: virtio,bridge=vmbr0 # Xy9-registered-value\n")
    finally:
        forget_all()
    assert "Xy9-registered-value" not in text


@pytest.mark.parametrize(
    "fixture",
    [
        "cluster/pvecm-status/pve9-3node-labcluster.txt",  # "Secure auth: on", no secret
        "pve/qemu-server/100-opnsense-snapshot-description.conf",
        "host/pveversion/package-versions-pve8-4-full-annotated.txt",
        "host/lspci/vv-excerpt-rtx4090-riser-lnksta-downgraded-ok.txt",
    ],
)
def test_real_captures_without_secrets_pass_unchanged(fixture: str) -> None:
    text = (FIXTURES / fixture).read_text()
    assert scrub_secrets(text) == (text, 0)


def test_corosyncs_token_timeout_is_not_a_secret() -> None:
    assert scrub_secrets("totem {\n  token: 3000\n}\n") == ("totem {\n  token: 3000\n}\n", 0)


def test_anonymise_replaces_every_address_of_a_real_pvecm_status_consistently() -> None:
    text = (FIXTURES / "cluster/pvecm-status/pve9-3node-labcluster.txt").read_text()
    anon = Anonymiser(["pve1"])
    out = anon.apply(text)
    assert "192.168.1." not in out
    assert "0x00000001          1 192.0.2.1 (local)\n0x00000002          1 192.0.2.2\n" in out
    assert anon.apply("ring0_addr: 192.168.1.48") == "ring0_addr: 192.0.2.2"  # the same address, the same stand-in
    assert "Ring ID:          1.685\n" in out  # not an address


def test_anonymise_keeps_versions_bus_ids_and_pve_paths() -> None:
    anon = Anonymiser(["pve", "pve.example.com"])
    line = (
        "pve-manager/8.2.4/faa83925c9641325 (running kernel: 6.8.12-4-pve) VBIOS 98.02.55.00.02 at 0000:41:00.0 "
        "12:34:56 /etc/pve/qemu-server/100.conf"
    )
    assert anon.apply(line) == line
    assert anon.apply("/etc/pve/nodes/pve/lxc/101.conf on pve (pve.example.com)") == (
        "/etc/pve/nodes/node1/lxc/101.conf on node1 (node1.example.invalid)"
    )
    assert anon.apply("net0: virtio=BC:24:11:2A:3B:4C,bridge=vmbr0") == "net0: virtio=02:00:00:00:00:01,bridge=vmbr0"
    assert anon.apply("inet6 2a01:4f8:1c1c:abcd::1/64") == "inet6 2001:db8::1/64"
