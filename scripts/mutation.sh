#!/usr/bin/env bash
# Mutation testing of the safety-critical modules (docs/testing.md): mutmut (pinned here, not in CI) changes one
# operator, constant or call at a time in the modules [tool.mutmut] in pyproject.toml names, and runs the fast
# unit tests that cover the changed function; a mutant no test fails on "survived". Writes mutants/ (ignored);
# the summary is mutants/summary.txt. Usage: scripts/mutation.sh [mutmut run arguments, e.g. a name glob]
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -c "import mutmut" 2>/dev/null || .venv/bin/pip install -q "mutmut==3.8.1"
rc=0
.venv/bin/mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "$@" || rc=$?
.venv/bin/mutmut results --all true > mutants/results.txt
.venv/bin/python - <<'PY'
# one line per module: killed / tested and the score; a mutant no test covers ("no tests") counts as not killed
import collections
import pathlib
import re

per: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
for line in pathlib.Path("mutants/results.txt").read_text().splitlines():
    m = re.match(r"\s*(\S+?)\.x[_ǁ]\S*__mutmut_\d+: (.+)$", line)
    if m:
        per[m.group(1)][m.group(2).strip()] += 1
out = []
for module, c in sorted(per.items()):
    tested = sum(c.values()) - c["skipped"] - c["not checked"]
    killed = c["killed"] + c["timeout"]
    score = 100 * killed / tested if tested else 0.0
    out.append(f"{module:40} {killed:4} / {tested:4} killed  {score:5.1f} %  survived {c['survived']}, no tests {c['no tests']}")
total_k = sum(c["killed"] + c["timeout"] for c in per.values())
total_t = sum(sum(c.values()) - c["skipped"] - c["not checked"] for c in per.values())
out.append(f"{'all':40} {total_k:4} / {total_t:4} killed  {100 * total_k / max(total_t, 1):5.1f} %")
pathlib.Path("mutants/summary.txt").write_text("\n".join(out) + "\n")
print("\n".join(out))
PY
exit "$rc"  # a run that could not test (its clean run failed) fails here, after the summary
