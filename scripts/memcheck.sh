#!/usr/bin/env bash
# The lifetime and safety tests under memory checkers: CPython's debug allocator
# (PYTHONMALLOC=debug: freed Python memory is overwritten, so a stale read gives a wrong value,
# and the allocator checks its own blocks) over tests/python/test_safety.py, and valgrind's
# memcheck over tests/memcheck/lifetimes.py (every read of freed or unallocated memory is an
# error). Valgrind is skipped, saying so, where it is not installed. Takes about 15 s.
# Usage: scripts/memcheck.sh [PYTHON]  (default .venv/bin/python, with cai installed)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-.venv/bin/python}

echo "-- PYTHONMALLOC=debug: tests/python/test_safety.py"
PYTHONMALLOC=debug "$py" -m pytest tests/python/test_safety.py -q -p no:cacheprovider

if ! command -v valgrind >/dev/null 2>&1; then
    echo "-- valgrind: not installed, skipped (apt-get install valgrind)"
    exit 0
fi
echo "-- valgrind memcheck: tests/memcheck/lifetimes.py"
# Uninitialised-value reports come from CPython itself (its small-int cache under valgrind)
# and are off; reads and writes of freed memory are what this checks.
log=$(mktemp)
if ! PYTHONMALLOC=malloc valgrind -q --undef-value-errors=no --error-exitcode=9 \
    --suppressions=tests/memcheck/loader.supp "$py" tests/memcheck/lifetimes.py >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    echo "valgrind found invalid memory accesses (above)"
    exit 1
fi
cat "$log"
rm -f "$log"
