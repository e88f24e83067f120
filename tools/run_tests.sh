#!/usr/bin/env bash
# The whole suite (make test): the tests that share the machine well on WORKERS pytest-xdist
# workers, each with its own DDS domain (test/conftest.py), then, alone on the machine, the tests
# marked `alone` (they make load, or their verdict is a wall-clock figure another test would
# disturb). Both parts always run; the exit status is the first part's failure, else the second's.
# Usage: tools/run_tests.sh PYTHON [pytest args...]   (WORKERS=0 runs everything in one process)
set -uo pipefail
PY="$1"; shift
N=$(nproc)
WORKERS="${WORKERS:-$(( N > 4 ? 4 : N ))}"   # as many as the cores, at most 4 (Makefile)
# the package and the tests' helpers byte-compiled (mtime-checked, so never stale): with
# PYTHONDONTWRITEBYTECODE set no import writes them, and each of the suite's processes compiled
# them again (make setup compiles the venv)
"$PY" -m compileall -q mj_manipulator_ros test bench >/dev/null 2>&1 || true
if [ "$WORKERS" = 0 ]; then
  exec "$PY" -m pytest "$@"
fi
"$PY" -m pytest -n "$WORKERS" --dist worksteal -m "not alone" "$@"; shared=$?
"$PY" -m pytest -m alone "$@"; alone=$?
# 5: the arguments selected no test in that part (e.g. one file)
[ "$shared" = 5 ] && shared=0
[ "$alone" = 5 ] && alone=0
[ "$shared" != 0 ] && exit "$shared"
exit "$alone"
