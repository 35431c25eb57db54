#!/usr/bin/env bash
# ruff and mypy over the project: the package and benchmarks/. The source folders
# install as dejaq.* through package-dir, which mypy cannot follow, so it checks
# a symlinked dejaq/ tree.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check .
ruff format --check .
tree=build/typecheck/dejaq
mkdir -p "$tree"
for pkg in core proto fbs broker driver storage_plugins outbox bridges; do
  ln -sfn "../../../$pkg" "$tree/$pkg"
done
(cd build/typecheck && mypy --config-file ../../pyproject.toml -p dejaq)
# The benchmarks import their own top-level packages (suite, scenarios: run.py
# puts benchmarks/ on sys.path) and dejaq through the same symlinked tree; the
# package's own errors are reported by the line above, not again here.
(cd benchmarks && MYPYPATH=../build/typecheck mypy --config-file ../pyproject.toml \
  --follow-imports=silent --cache-dir ../build/typecheck/.mypy_cache_benchmarks run.py hotpath.py scenarios suite)
