import json
from importlib import resources

import pytest

from gpuhost.errors import ConfigError
from gpuhost.serve.flagtable import (
    Match,
    available_versions,
    history,
    load_table,
    removed_in,
    resolve,
)


def test_tables_cover_the_pinned_and_between_versions():
    versions = available_versions()
    for v in ("0.5.9", "0.5.15.post1", "0.5.17", "0.5.20", "0.5.21", "0.5.22", "0.5.23"):
        assert v in versions
    assert list(versions) == sorted(versions, key=lambda s: [int(x) for x in s.replace(".post", ".").split(".")])


def test_committed_format_is_the_shared_one():
    text = (resources.files("gpuhost.serve") / "flags" / "sglang-0.5.23.json").read_text()
    data = json.loads(text)
    assert set(data) == {"sglang_version", "source", "args"}
    assert data["sglang_version"] == "0.5.23"
    assert data["source"].startswith("sglang-0.5.23-") and " sha256:" in data["source"]
    for arg in data["args"]:
        assert set(arg) == {"flags", "dest", "action", "type", "choices", "nargs", "default", "help"}
    tp = next(a for a in data["args"] if a["dest"] == "tp_size")
    assert tp["flags"] == ["--tp-size", "--tensor-parallel-size"] and tp["type"] == "int" and tp["default"] == 1


def test_facts_of_the_reference_hold_in_0_5_23():
    t = load_table("0.5.23")
    kv = t.by_flag()["--kv-cache-dtype"]
    assert "fp8_e4m3" in kv.choices and "fp8" not in kv.choices
    assert "b12x" not in t.by_flag()["--moe-runner-backend"].choices
    assert t.by_flag()["--cuda-graph-backend-decode"].choices == ["full", "breakable", "disabled"]
    assert t.by_flag()["--disable-cuda-graph"].deprecated


def test_resolve_exact_prefix_ambiguous_unknown():
    t = load_table("0.5.23")
    assert resolve(t, "--tp-size").match is Match.EXACT
    r = resolve(t, "--tp")
    assert r.match is Match.PREFIX and r.arg is not None and r.arg.dest == "tp_size"
    r = resolve(t, "--cuda-graph-max-bs")
    assert r.match is Match.AMBIGUOUS
    assert r.candidates == ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]
    assert resolve(t, "--pp").match is Match.AMBIGUOUS
    assert resolve(t, "--enable-nan-detection").match is Match.UNKNOWN


def test_removed_versions_are_derived_from_the_tables():
    assert removed_in("--nsa-decode-backend", "0.5.23") == ("0.5.19", "0.5.20")  # the reference said 0.5.21
    assert removed_in("--enable-nan-detection", "0.5.23") == ("0.5.12.post1", "0.5.15.post1")
    assert removed_in("--tp-size", "0.5.23") is None
    assert removed_in("--no-such-flag", "0.5.23") is None
    states = {v: (a.action if a else None) for v, a in history("--cuda-graph-max-bs")}
    assert states["0.5.9"] == "store" and states["0.5.15.post1"].startswith("Deprecated") and states["0.5.20"] is None


def test_unknown_version_is_a_config_error():
    with pytest.raises(ConfigError, match="no SGLang flag table for version 9.9.9"):
        load_table("9.9.9")
