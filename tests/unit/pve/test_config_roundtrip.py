"""Real PVE config files parse and write back unchanged (see tests/fixtures/pve/SOURCE.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gpuhost.pve import config

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pve"
ALL = sorted(p for p in FIXTURES.rglob("*.conf"))
# Written by PVE's own writer (or pasted from hosts where PVE wrote them): canonical form.
CANONICAL = [p for p in ALL if p.name.endswith("-expected.conf") or p.name.startswith(("100-", "116-", "250-"))]


def _kind(path: Path) -> config.GuestKind:
    return "lxc" if path.parent.name == "lxc" else "qemu"


def test_fixtures_present() -> None:
    assert len(ALL) >= 12


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_unchanged_file_writes_back_byte_identical(path: Path) -> None:
    raw = path.read_text()
    parsed = config.parse(raw, _kind(path))
    assert parsed.text() == raw
    assert parsed.digest == config.digest_of(path.read_bytes())


@pytest.mark.parametrize("path", CANONICAL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_pve_written_file_renders_identically(path: Path) -> None:
    raw = path.read_text()
    assert config.parse(raw, _kind(path)).render() == raw


def test_sections_of_a_file_with_pending_special_and_snapshots() -> None:
    parsed = config.parse((FIXTURES / "qemu-server" / "120-duplicate-sections.conf").read_text(), "qemu")
    # PVE keeps the last of duplicated sections
    assert parsed.pending is not None and parsed.pending.options == {"vga": "qxl"}
    assert parsed.specials["cloudinit"].options == {"name": "deb123"}
    assert parsed.snapshots["foo"].options["cores"] == "4"
    assert parsed.get("parent") == "foo"


def test_snapshot_description_is_decoded_and_kept_in_its_section() -> None:
    parsed = config.parse((FIXTURES / "qemu-server" / "302-snapshot-comment.conf").read_text(), "qemu")
    assert parsed.main.description is None
    assert parsed.snapshots["test"].description == "test comment"
    assert parsed.snapshots["test"].options["vmstate"] == "somestorage:state-volume"


def test_raw_lxc_keys_are_kept_in_order_after_sorted_keys() -> None:
    path = FIXTURES / "lxc" / "116-nvidia-raw-lxc-keys.conf"
    parsed = config.parse(path.read_text(), "lxc")
    assert parsed.lxc_values("lxc.cgroup2.devices.allow") == ["c 195:* rwm", "c 511:* rwm", "c 236:* rwm", "a"]
    assert ("lxc.cap.drop", "") in parsed.main.lxc
    parsed.set("cores", "8")
    text = parsed.text()
    assert "cores: 8\n" in text
    assert text.index("unprivileged: 1") < text.index("lxc.cgroup2.devices.allow: c 195:* rwm")
    assert text.endswith("lxc.cap.drop: \nlxc.apparmor.profile: unconfined\n")


def test_a_change_renders_in_pve_order_moving_comments_to_the_top() -> None:
    parsed = config.parse((FIXTURES / "qemu-server" / "1422-restore-unsorted.conf").read_text(), "qemu")
    parsed.set("hostpci0", "0000:01:00.0,pcie=1")
    lines = parsed.text().splitlines()
    assert lines[0] == "# some properties should be filtered"
    assert lines[1] == "#qmdump#map%3Ascsi0%3Adrive-scsi0%3Amydir%3Aqcow2%3A"
    keys = [line.split(":", 1)[0] for line in lines[2:]]
    assert keys == sorted(keys)
    assert "hostpci0: 0000:01:00.0,pcie=1" in lines


def test_pending_section_is_created_and_removed_with_its_delete_list() -> None:
    parsed = config.parse("boot: order=scsi0\nmemory: 2048\n", "qemu")
    parsed.set("machine", "q35", section="pending")
    parsed.add_pending_delete("numa")
    assert parsed.text() == "boot: order=scsi0\nmemory: 2048\n\n[PENDING]\ndelete: numa\nmachine: q35\n"
    assert parsed.pending_deletes() == {"numa": False}
    parsed.remove_pending_delete("numa")
    parsed.delete("machine", section="pending")
    assert parsed.pending is None
    assert parsed.text() == "boot: order=scsi0\nmemory: 2048\n"


def test_container_pending_header_is_pve_pending() -> None:
    parsed = config.parse("arch: amd64\n", "lxc")
    parsed.set("memory", "4096", section="pending")
    assert parsed.text() == "arch: amd64\n\n[pve:pending]\nmemory: 4096\n"
    again = config.parse(parsed.text(), "lxc")
    assert again.pending is not None and again.pending.options == {"memory": "4096"}


def test_description_round_trip_encodes_colons_and_newlines() -> None:
    parsed = config.parse("memory: 512\n", "qemu")
    parsed.set("description", "GPU box: 8x H200\nsecond line")
    assert parsed.text() == "#GPU box%3A 8x H200\n#second line\nmemory: 512\n"
    assert config.parse(parsed.text(), "qemu").get("description") == "GPU box: 8x H200\nsecond line"


def test_digest_is_sha1_of_raw_content() -> None:
    raw = "memory: 512\n"
    assert config.parse(raw, "qemu").digest == hashlib.sha1(raw.encode()).hexdigest()


def test_lxc_key_with_equals_form_parses() -> None:
    parsed = config.parse("arch: amd64\nlxc.init_cmd = /sbin/my_own_init\n", "lxc")
    assert parsed.lxc_values("lxc.init_cmd") == ["/sbin/my_own_init"]


def test_unparsable_line_is_a_warning_or_strict_error() -> None:
    parsed = config.parse("memory: 512\nthis is not valid\n", "qemu")
    assert parsed.warnings == ["unable to parse config: this is not valid"]
    with pytest.raises(config.ConfigParseError):
        config.parse("memory: 512\nthis is not valid\n", "qemu", strict=True)


def test_property_string() -> None:
    assert config.parse_property_string("0000:01:00.0,pcie=1,x-vga=1", "host") == {
        "host": "0000:01:00.0",
        "pcie": "1",
        "x-vga": "1",
    }


def test_a_percent_in_a_description_is_written_so_that_pve_reads_it_back() -> None:
    # pve-common 06f436f ("fix #5486: tools: encode_text: add '%' to list of encoded characters"): a description
    # with an already encoded link must be stored as '%2520', "which gets then correctly decoded to '%20' again"
    conf = config.parse("arch: amd64\nhostname: llm\n", "lxc")
    conf.set("description", "docs: https://example.org/a%20b")
    text = conf.text()
    assert text.splitlines()[0] == "#docs%3A https%3A//example.org/a%2520b"
    # read back as PVE reads a '#' line: decode_text($1) . "\n" (pve-container Config.pm parse_pct_config)
    assert config.parse(text, "lxc").main.description == "docs: https://example.org/a%20b\n"
