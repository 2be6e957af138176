"""The corpus index: every capture under tests/fixtures is named in the SOURCE.md of its directory (or of the
nearest directory above it that has one), so each one can be traced to where it was published."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "fixtures"


def _index_for(path: Path) -> Path | None:
    for parent in path.parents:
        if (parent / "SOURCE.md").is_file():
            return parent / "SOURCE.md"
        if parent == ROOT:
            return None
    return None


def test_every_fixture_is_in_its_source_index():
    unlisted = []
    for p in sorted(ROOT.rglob("*")):
        if not p.is_file() or p.name == "SOURCE.md":
            continue
        index = _index_for(p)
        if index is None:
            unlisted.append(str(p.relative_to(ROOT)))
            continue
        text = index.read_text()
        rel = p.relative_to(index.parent)
        # a file is listed by its name, its path, or a directory of it that the index describes as a whole
        dirs = [f"{d.as_posix()}/" for d in rel.parents if d.as_posix() != "."]
        if p.name not in text and rel.as_posix() not in text and not any(d in text for d in dirs):
            unlisted.append(str(p.relative_to(ROOT)))
    assert unlisted == []
