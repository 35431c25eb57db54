#!/usr/bin/env bash
# Quick start, command 2: the whole test suite, as CI runs it.
# Checks generated code is fresh, lints (ruff, mypy), runs pytest on the
# compiled hot path, then the conformance suite on memory and SQLite, the wire
# and the driver tests again on pure Python, then the benchmark smoke run
# (benchmarks/run.py --smoke, about a minute), the bridges smoke (about 15 s) and
# the console's pages timed on a topic of 1M messages (SQLite, about a minute).
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
echo "== tests ($(dejaq --version | tail -1))"
python -m pytest --durations=25 "$@"
# The Python modules stay the reference: the conformance suite, the wire codecs
# and the driver also run on them, so neither flavour rots (docs/compiled.md).
# Conformance on memory and SQLite only: the compiled storage modules are the
# memory backend's, and the served backends add no compiled code of their own.
echo "== tests on pure Python (DEJAQ_PURE_PYTHON=1): conformance on memory and SQLite, wire, driver"
DEJAQ_PURE_PYTHON=1 python -m pytest -q \
  tests/storage_plugins/conformance -k "not redis and not postgres" \
  tests/core/test_wire_*.py tests/fuzz/test_batch_decoders.py tests/driver
echo "== benchmark smoke (figures come out, nothing lost or early; speed not judged)"
python benchmarks/run.py --smoke
python benchmarks/ab.py --saved benchmarks/results/smoke.json benchmarks/results/smoke.json
echo "== bridges smoke: Redis Stream -> dejaq -> Redis Stream (figures printed; nothing early)"
python benchmarks/bridges.py --smoke
echo "== console pages on 1M waiting messages (figures printed and saved; speed not judged)"
python benchmarks/console_pages.py --smoke
