#!/usr/bin/env bash
# Build the docs site strictly (docs/, mkdocs.yml) into build/site: a broken
# link, a page missing from the nav, or an API reference that names something
# the code no longer has fails the build. `--serve [IP:PORT]` serves it instead
# (default 127.0.0.1:8000), rebuilt as pages change.
set -euo pipefail
cd "$(dirname "$0")/.."
# The API reference reads the sources statically; the source folders install as
# dejaq.* through package-dir, so it reads a symlinked dejaq/ tree (as mypy does
# in scripts/lint.sh).
tree=build/typecheck/dejaq
mkdir -p "$tree"
for pkg in core proto fbs broker driver storage_plugins; do
  ln -sfn "../../../$pkg" "$tree/$pkg"
done
if [ "${1:-}" = "--serve" ]; then
  exec zensical serve --dev-addr "${2:-127.0.0.1:8000}"
fi
zensical build --strict --clean
echo "the site is in $(pwd)/build/site: open build/site/index.html, or scripts/docs.sh --serve"
