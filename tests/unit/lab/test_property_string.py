"""The lab's own property-string reading, as pve-common JSONSchema.pm:1096-1135 parse_property_string does it
(expected values read from that function, not from gpuhost's parser)."""

from __future__ import annotations

import pytest

from gpuhost.lab.node.property_string import PropertyStringError, parse


def test_default_key_and_pairs():
    assert parse("0000:01:00.0,pcie=1", "host") == {"host": "0000:01:00.0", "pcie": "1"}
    assert parse("pcie=1,0000:01:00.0", "host") == {"pcie": "1", "host": "0000:01:00.0"}
    assert parse("/dev/nvidia0,gid=44,", "path") == {"path": "/dev/nvidia0", "gid": "44"}  # blank parts skipped


def test_what_pve_dies_on():
    with pytest.raises(PropertyStringError, match="duplicate key in comma-separated list property: gid"):
        parse("/dev/nvidia0,gid=44,gid=45", "path")
    with pytest.raises(PropertyStringError, match="duplicate key in comma-separated list property: path"):
        parse("/dev/a,/dev/b", "path")
    with pytest.raises(PropertyStringError, match="does not define a default key"):
        parse("q35")
    with pytest.raises(PropertyStringError):
        parse("type=", "type")  # ^([^=]+)=(.+)$ needs a value
