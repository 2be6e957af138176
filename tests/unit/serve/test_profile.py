from pathlib import Path

import pytest

from gpuhost.errors import ConfigError
from gpuhost.serve.profile import get_profile, load_profiles

CURRENT = "glm5-nvfp4-tp8-sm120"


def test_shipped_profiles():
    profiles = load_profiles()
    cur = profiles[CURRENT]
    assert cur.pins.sglang == "0.5.23" and cur.pins.transformers == "5.19.0" and cur.pins.flashinfer == "0.7.2"
    assert cur.pins.torch == "2.14.1" and cur.architectures == ["sm120"] and cur.tp_size == 8
    assert cur.flags["--kv-cache-dtype"] == "fp8_e4m3"
    assert cur.flags["--moe-runner-backend"] == "flashinfer_cutlass"
    assert cur.flags["--disable-shared-experts-fusion"] is True
    brk = profiles["glm5-nvfp4-tp8-sm120-graph-breakable"]
    assert brk.status == "fallback" and brk.fallback_of == CURRENT
    assert brk.flags["--cuda-graph-backend-decode"] == "breakable"
    assert profiles["glm5-nvfp4-tp8-sm120-graph-disabled"].flags["--cuda-graph-backend-decode"] == "disabled"
    hist = profiles["glm5-nvfp4-tp8-sm120-seeds-2026-02"]
    assert hist.status == "historical" and hist.pins.sglang == "0.5.9" and hist.pins.transformers == "5.2.0"
    assert hist.flags["--disable-cuda-graph"] is True and hist.flags["--disable-radix-cache"] is True


def test_user_directory_adds_and_overrides(tmp_path: Path):
    (tmp_path / "mine.yml").write_text(
        "name: my-profile\npins: {sglang: '0.5.23', transformers: '5.19.0'}\nmodel: /models/glm5\n"
        "architectures: [sm90]\ngpus: 8\ntp_size: 8\nflags: {--tp-size: 8}\n"
    )
    profiles = load_profiles([tmp_path])
    assert profiles["my-profile"].model == "/models/glm5" and CURRENT in profiles
    assert get_profile("my-profile", [tmp_path / "mine.yml"]).architectures == ["sm90"]


def test_a_profile_file_edited_between_loads_is_read_again(tmp_path: Path):
    mine = tmp_path / "mine.yml"
    text = (
        "name: my-profile\npins: {sglang: '0.5.23', transformers: '5.19.0'}\nmodel: /models/glm5\n"
        "architectures: [sm90]\ngpus: 8\ntp_size: 8\nflags: {--tp-size: 8}\n"
    )
    mine.write_text(text)
    assert get_profile("my-profile", [mine]).model == "/models/glm5"
    mine.write_text(text.replace("/models/glm5", "/models/glm6"))  # same size, within the same clock tick
    assert get_profile("my-profile", [mine]).model == "/models/glm6"
    mine.write_text(text.replace("gpus: 8", "gpus: x"))
    with pytest.raises(ConfigError):
        load_profiles([mine], shipped=False)


def test_errors_name_file_line_and_field(tmp_path: Path):
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "profiles:\n  - name: x\n    pins: {sglang: '0.5.23', transformers: '5.19.0'}\n"
        "    model: m\n    architectures: [sm120]\n    gpus: 8\n    tp_size: eight\n"
    )
    with pytest.raises(ConfigError) as err:
        load_profiles([bad], shipped=False)
    assert err.value.file == str(bad) and err.value.line == 7 and err.value.field == "profiles.0.tp_size"
    assert f"{bad}:7: field 'profiles.0.tp_size'" in str(err.value)


def test_unknown_field_and_bad_flag_spelling(tmp_path: Path):
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "name: x\npins: {sglang: '0.5.23', transformers: '5.19.0'}\nmodel: m\narchitectures: [sm120]\n"
        "gpus: 8\ntp_size: 8\ntp: 8\n"
    )
    with pytest.raises(ConfigError, match=r"bad.yml:7: field 'tp': unknown field"):
        load_profiles([bad], shipped=False)
    bad.write_text(
        "name: x\npins: {sglang: '0.5.23', transformers: '5.19.0'}\nmodel: m\narchitectures: [sm120]\n"
        "gpus: 8\ntp_size: 8\nflags:\n  tp-size: 8\n"
    )
    with pytest.raises(ConfigError, match=r"bad.yml:7: field 'flags'.*leading '--'"):
        load_profiles([bad], shipped=False)


def test_unknown_profile_name():
    with pytest.raises(ConfigError, match="no profile 'nope'"):
        get_profile("nope")
