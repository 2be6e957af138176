"""The guides' numbered steps render as one list each (Python-Markdown nests a list item's content at 4 spaces;
3-space nesting ends the list, and the next step starts a new list numbered 1 again)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
GUIDES = sorted((ROOT / "docs").glob("*.md"))


def _extensions() -> tuple[list[str], dict]:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)  # !!python/name tags of other configs
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    names, configs = [], {}
    for ext in config["markdown_extensions"]:
        name, conf = next(iter(ext.items())) if isinstance(ext, dict) else (ext, {})
        names.append(name)
        configs[name] = conf or {}
    return names, configs


class _TopLists(HTMLParser):
    """The item count of each <ol> that is not inside another list."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # open <ol>/<ul>
        self.counts: list[int] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "ol" and self.depth == 0:
            self.counts.append(0)
        if tag == "li" and self.depth == 1 and self.counts and self._in_ol:
            self.counts[-1] += 1
        if tag in ("ol", "ul"):
            if self.depth == 0:
                self._in_ol = tag == "ol"
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("ol", "ul"):
            self.depth -= 1

    _in_ol = False


def _source_lists(text: str) -> list[int]:
    """Items of each top-level numbered list as written (a list starts at its '1.')."""
    lists: list[int] = []
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        m = re.match(r"^(\d+)\. ", line)
        if m:
            if m.group(1) == "1" or not lists:
                lists.append(0)
            lists[-1] += 1
    return lists


@pytest.mark.parametrize("guide", GUIDES, ids=[g.name for g in GUIDES])
def test_numbered_steps_render_as_one_list(guide: Path) -> None:
    names, configs = _extensions()
    html = markdown.markdown(guide.read_text(), extensions=names, extension_configs=configs)
    parser = _TopLists()
    parser.feed(html)
    assert parser.counts == _source_lists(guide.read_text()), f"{guide.name}: a numbered list is split"


def test_the_site_opened_from_disk_has_its_search(tmp_path: Path) -> None:
    """The offline plugin ships the search index as a script (a file:// page cannot fetch it) and the search worker
    runs through the iframe-worker shim, vendored so that no page needs the network."""
    pytest.importorskip("material")
    import subprocess
    import sys

    site = tmp_path / "site"
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert (site / "search" / "search_index.js").read_text().startswith("var __index = {")
    page = (site / "reference" / "cli.html").read_text()
    # the worker runs in an iframe through the vendored shim: nothing is fetched from the network
    assert '<script src="../assets/iframe-worker/shim.js"' in page and "unpkg.com" not in page
    assert (site / "getting-started.html").is_file(), "page URLs are files (use_directory_urls: false)"
