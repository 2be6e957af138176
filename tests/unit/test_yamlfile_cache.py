"""A parsed YAML file is kept in the user's cache by the hash of its bytes: the next read of the same bytes gives
the same data and line numbers without parsing, an edit is seen, an error is never kept, and a cache file that is
not the user's alone, or names anything but YAML data, is not loaded."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from gpuhost import yamlfile
from gpuhost.errors import ConfigError

INVENTORY = """\
nodes:
  pve1:
    address: 192.0.2.10
    ssh:
      user: root
      persist: 60
groups:
  gpu:
    nodes: [pve1]
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gpuhost" / "yaml"


def _kept(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.pickle")) if cache.exists() else []


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any) -> Any:
        raise AssertionError("parsed again")

    monkeypatch.setattr(yamlfile, "_parse", refuse)


def test_the_same_bytes_are_read_from_the_cache_with_their_lines(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "inventory.yml"
    f.write_text(INVENTORY)
    first = yamlfile.load(f)
    assert len(_kept(cache)) == 1
    _no_parse(monkeypatch)
    again = yamlfile.load(f)
    assert yamlfile.plain(again) == {
        "nodes": {"pve1": {"address": "192.0.2.10", "ssh": {"user": "root", "persist": 60}}},
        "groups": {"gpu": {"nodes": ["pve1"]}},
    }
    assert again is not first
    # the lines a human reads in the text above
    assert yamlfile.line_of(again, ["nodes", "pve1", "ssh", "persist"]) == 6
    assert yamlfile.line_of(again, ["groups", "gpu", "nodes", 0]) == 9


def test_the_cache_folder_and_files_are_the_users_alone(tmp_path: Path, cache: Path) -> None:
    f = tmp_path / "a.yml"
    f.write_text(INVENTORY)
    yamlfile.load(f)
    assert cache.stat().st_mode & 0o777 == 0o700
    (kept,) = _kept(cache)
    assert kept.stat().st_mode & 0o777 == 0o600
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


def test_an_edited_file_is_parsed_again(tmp_path: Path, cache: Path) -> None:
    f = tmp_path / "a.yml"
    f.write_text(INVENTORY)
    yamlfile.load(f)
    f.write_text(INVENTORY.replace("persist: 60", "persist: 0"))
    assert yamlfile.plain(yamlfile.load(f))["nodes"]["pve1"]["ssh"]["persist"] == 0
    assert len(_kept(cache)) == 2


def test_a_file_that_does_not_parse_is_never_kept_and_its_error_names_the_line_each_time(
    tmp_path: Path, cache: Path
) -> None:
    f = tmp_path / "bad.yml"
    f.write_text("nodes:\n  pve1: {}\n  pve1: {}\n")
    for _ in range(2):
        with pytest.raises(ConfigError) as err:
            yamlfile.load(f)
        assert "duplicate key 'pve1'" in str(err.value)
        assert err.value.line == 3
    assert _kept(cache) == []


def test_a_file_naming_a_secret_is_not_kept(tmp_path: Path, cache: Path) -> None:
    f = tmp_path / "pasted.yml"
    f.write_text("nodes:\n  pve1:\n    ssh:\n      password: hunter2hunter2\n")
    assert yamlfile.plain(yamlfile.load(f))["nodes"]["pve1"]["ssh"]["password"] == "hunter2hunter2"
    assert _kept(cache) == []
    # a reference to a secret holds none: kept
    f.write_text("nodes:\n  pve1:\n    ssh:\n      password_file: /etc/gpuhost/pw\n")
    yamlfile.load(f)
    assert len(_kept(cache)) == 1


@pytest.mark.parametrize("who", ["group-writable file", "group-writable folder"])
def test_a_cache_file_others_could_write_is_not_loaded(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, who: str
) -> None:
    f = tmp_path / "a.yml"
    f.write_text(INVENTORY)
    yamlfile.load(f)
    (kept,) = _kept(cache)
    other = tmp_path / "other.yml"
    other.write_text("nodes: {}\n")
    # what someone else put there: other data under the same name
    kept.write_bytes(pickle.dumps(yamlfile.load(other)))
    (kept if who.endswith("file") else cache).chmod(0o620 if who.endswith("file") else 0o770)
    assert yamlfile.plain(yamlfile.load(f))["nodes"]["pve1"]["address"] == "192.0.2.10"


class _Runs:
    """Unpickling this runs os.system: what a forged cache file would do if any class were allowed."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))

    def __init__(self, marker: Path) -> None:
        self.marker = marker


def test_a_cache_file_naming_anything_but_yaml_data_runs_nothing(tmp_path: Path, cache: Path) -> None:
    f = tmp_path / "a.yml"
    f.write_text(INVENTORY)
    yamlfile.load(f)
    (kept,) = _kept(cache)
    marker = tmp_path / "ran"
    kept.write_bytes(pickle.dumps(_Runs(marker)))
    kept.chmod(0o600)
    assert yamlfile.plain(yamlfile.load(f))["groups"] == {"gpu": {"nodes": ["pve1"]}}
    assert not marker.exists()


def test_the_cache_is_pruned_oldest_first(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlfile, "CACHE_FILES", 4)
    kept = []
    for i in range(5):
        f = tmp_path / f"f{i}.yml"
        f.write_text(f"n: {i}\n")
        yamlfile.load(f)
        path = yamlfile._cache_file(f.read_bytes())
        assert path is not None
        kept.append(path)
        if path.exists():
            os.utime(path, ns=(10**18 + i, 10**18 + i))  # written in the order of i
    # the fifth is one over four: the oldest go until half are left
    assert _kept(cache) == sorted(kept[3:])
