#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite. Needs root: the integration
# tests start real sshd hosts in private namespaces on 127.0.0.0/8.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Three workers (pytest-xdist), a test module each: the lab tests mostly wait on their simulated nodes (installs,
# reboots, server start-up), so on 2 cores three at once take under half the serial time. Each worker reserves its
# own loopback addresses (tests/lab_fixtures.py); `-n 0` after this runs the suite serially.
# A test that fails is run once more (pytest-rerunfailures) before the session counts it: a real defect fails
# both times, and a timing race on the loaded 2-core machine shows as "N rerun" in the closing line and an "R" in
# the progress, to be fixed like any failure (docs/testing.md).
exec .venv/bin/python -m pytest -q -n 3 --dist loadfile --reruns 1 --reruns-delay 2 "$@"
