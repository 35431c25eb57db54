#!/usr/bin/env bash
# Quick start, command 2: the whole test suite, as CI runs it.
# Checks generated code is fresh, lints (ruff, mypy), runs pytest, then the
# benchmark smoke run (benchmarks/run.py --smoke, about a minute) and the
# console's pages timed on a topic of 1M messages (SQLite, about a minute).
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
echo "== tests"
python -m pytest --durations=25 "$@"
echo "== benchmark smoke (figures come out, nothing lost or early; speed not judged)"
python benchmarks/run.py --smoke
echo "== console pages on 1M waiting messages (figures printed and saved; speed not judged)"
python benchmarks/console_pages.py --smoke
