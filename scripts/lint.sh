#!/usr/bin/env bash
# ruff and mypy over the project. The source folders install as dejaq.* through
# package-dir, which mypy cannot follow, so it checks a symlinked dejaq/ tree.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check .
ruff format --check .
tree=build/typecheck/dejaq
mkdir -p "$tree"
for pkg in core proto fbs broker driver storage_plugins; do
  ln -sfn "../../../$pkg" "$tree/$pkg"
done
(cd build/typecheck && mypy --config-file ../../pyproject.toml -p dejaq)
