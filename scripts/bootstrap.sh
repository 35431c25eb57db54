# Sourced by serve.sh and test.sh: make .venv and install dejaq (with dev tools)
# into it, again only when pyproject.toml changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
stamp=".venv/.dejaq-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "== installing dejaq-timeline[dev] into .venv: the first time takes a few minutes" \
    "(the dependencies, then compiling the hot path), later ones only what changed"
  .venv/bin/python -m pip install --quiet --upgrade pip
  # The build's own requirements (mypyc among them) go into .venv once, and the
  # build runs there: an isolated build would install them all again (~12 s).
  .venv/bin/python -m pip install --quiet $(.venv/bin/python -c \
    'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
  .venv/bin/python -m pip install --quiet --no-build-isolation -e ".[dev]"
  installed=1
  echo "$want" > "$stamp"
fi
# The compiled hot path (setup.py, core/hotpath.py): built by the install above,
# built again when a compiled module or the build changed (~30 s of CPU, on
# every core; C files compiled before are reused), so
# the tests run the compiled modules. `dejaq --version` says which flavour runs.
hot_stamp=".venv/.dejaq-hotpath"
hot="$(.venv/bin/python - <<'PY'
import hashlib, pathlib, runpy
h = runpy.run_path("core/hotpath.py", run_name="bootstrap")
sources = [h["source_of"](m, pathlib.Path(".")) for m in (*h["COMPILED"], *h["KERNELS"])]
files = ["setup.py", "core/hotpath.py"] + [str(f) for s in sources for f in h["source_files"](s)]
print(hashlib.sha256(b"".join(pathlib.Path(f).read_bytes() for f in files)).hexdigest())
PY
)"
if [ ! -f "$hot_stamp" ] || [ "$(cat "$hot_stamp")" != "$hot" ]; then
  if [ -z "${installed:-}" ]; then
    echo "== compiling the hot path (mypyc): about 30 s of CPU"
    .venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
  fi
  echo "$hot" > "$hot_stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"
