#!/usr/bin/env bash
# Quick start, command 2: the whole test suite, as CI runs it.
# Checks generated code is fresh, lints (ruff, mypy), runs pytest, then the
# benchmark smoke run (benchmarks/run.py --smoke, about a minute).
source "$(dirname "$0")/bootstrap.sh"
source scripts/servers.sh
echo "== generated code"
python scripts/generate_wire.py --check
echo "== lint"
scripts/lint.sh
echo "== docs (a broken link or a missing page fails)"
scripts/docs.sh
echo "== tests"
python -m pytest "$@"
echo "== benchmark smoke (figures come out, nothing lost or early; speed not judged)"
python benchmarks/run.py --smoke
