#!/usr/bin/env bash
# Quick start, command 2: the whole test suite, as CI runs it.
# Checks generated code is fresh, lints (ruff, mypy), runs pytest on the
# compiled hot path, then the conformance suite on memory and SQLite, the wire
# and the driver tests again on pure Python, then the benchmark smoke run
# (benchmarks/run.py --smoke, about a minute), the bridges smoke (about 15 s), the
# pause smoke (3 brokers on Redis, about 16 s) and
# the console's pages timed on a topic of 1M messages (SQLite, about a minute).
# With no arguments the fault, bridge and cluster stories, the pure-Python run
# and the console's pages run in a second process beside the main pytest run.
#
# scripts/test.sh --fast [PYTEST ARGS]: the in-process tier only, for the edit
# loop (under two minutes): the core, the broker in-process, the driver, and the
# storage conformance suite on memory and SQLite (tests/conftest.py says which).
# No server is installed or started, and nothing is linted: scripts/lint.sh.
source "$(dirname "$0")/bootstrap.sh"
if [ "${1:-}" = "--fast" ]; then
  shift
  echo "== tests (fast tier)"
  exec python -m pytest --fast "$@"
fi
source scripts/servers.sh
echo "== generated code"
python scripts/generate_wire.py --check
echo "== lint"
scripts/lint.sh
echo "== docs (a broken link or a missing page fails)"
scripts/docs.sh
PURE_PYTHON_TESTS=(tests/storage_plugins/conformance -k "not redis and not postgres"
  tests/core/test_wire_*.py tests/fuzz/test_batch_decoders.py tests/driver)
echo "== tests ($(dejaq --version | tail -1))"
if [ $# -gt 0 ]; then
  python -m pytest --durations=25 "$@"
  # The Python modules stay the reference: the conformance suite, the wire codecs
  # and the driver also run on them, so neither flavour rots (docs/compiled.md).
  echo "== tests on pure Python (DEJAQ_PURE_PYTHON=1): conformance on memory and SQLite, wire, driver"
  DEJAQ_PURE_PYTHON=1 python -m pytest -q "${PURE_PYTHON_TESTS[@]}"
  echo "== console pages on 1M waiting messages (figures printed and saved; speed not judged)"
  python benchmarks/console_pages.py --smoke
else
  # Two processes at once. Beside the main pytest run: the bridges', the
  # cluster's and the fault runs' stories (they spend their time waiting on
  # servers, leases, timers and faults), then the pure-Python run (the Python
  # modules stay the reference: conformance on memory and SQLite, the wire
  # codecs and the driver run on them too, docs/compiled.md; the compiled
  # storage modules are the memory backend's) and the console's pages. Each
  # pytest process starts its own servers on free ports, in its own folder.
  side_dir=$(mktemp -d)
  beside() {
    local rc=0
    echo "== tests beside the main run: tests/bridges, tests/cluster, tests/faults"
    python -m pytest --durations=10 -p no:cacheprovider --basetemp="$side_dir/tmp" \
      tests/bridges tests/cluster tests/faults || rc=1
    echo "== tests on pure Python (DEJAQ_PURE_PYTHON=1): conformance on memory and SQLite, wire, driver"
    DEJAQ_PURE_PYTHON=1 python -m pytest -q -p no:cacheprovider --basetemp="$side_dir/pure" \
      "${PURE_PYTHON_TESTS[@]}" || rc=1
    echo "== console pages on 1M waiting messages (figures printed and saved; speed not judged)"
    python benchmarks/console_pages.py --smoke || rc=1
    return "$rc"
  }
  beside >"$side_dir/log" 2>&1 &
  side=$!
  main_rc=0
  python -m pytest --durations=25 \
    --ignore=tests/bridges --ignore=tests/cluster --ignore=tests/faults || main_rc=$?
fi
echo "== benchmark smoke (figures come out, nothing lost or early; speed not judged)"
python benchmarks/run.py --smoke
python benchmarks/ab.py --saved benchmarks/results/smoke.json benchmarks/results/smoke.json
echo "== bridges smoke: Redis Stream -> dejaq -> Redis Stream (figures printed; nothing early)"
python benchmarks/bridges.py --smoke
echo "== pause smoke: 3 brokers on Redis, a topic paused and resumed (nothing sent while paused, none lost or early)"
python benchmarks/pause_drain.py --smoke
if [ $# -eq 0 ]; then
  side_rc=0
  wait "$side" || side_rc=$?
  cat "$side_dir/log"
  if [ "$main_rc" -ne 0 ] || [ "$side_rc" -ne 0 ]; then
    echo "tests failed (exit codes: main run $main_rc, beside it $side_rc)" >&2
    exit 1
  fi
fi
