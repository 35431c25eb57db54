"""The compiled hot path: which modules mypyc compiles, and which flavour runs.

The modules in ``COMPILED`` are ordinary typed Python; ``setup.py`` compiles
them with mypyc when a C compiler is there, and the extension module sits
beside its ``.py`` and shadows it, so the compiled module *is* the Python
module, built from the same source. Importing this module installs a finder
in front of the import system that loads the ``.py`` instead of the compiled
one when

- ``DEJAQ_PURE_PYTHON=1`` is set (to compare the two flavours), or
- any compiled module's ``.py`` (or a kernel's ``.c``, or a header it
  includes from its folder) no longer matches the source it was built from
  (an edited checkout before ``pip install -e .`` ran again): stale
  machine code must never run in place of the rule as written. All of them
  then load as ``.py``, since compiled modules call each other natively.

The modules in ``KERNELS`` are written in C by hand (a ``.c`` beside the
Python module that uses it, which holds the reference in Python and falls
back to it): built with the others, and in the same cases refused at import
(``ModuleNotFoundError``), so their users run the reference.

Every package holding a module of ``COMPILED`` imports this module first, so
the finder is in place before any of them loads. The variable is read here,
at import, because it decides which code is imported at all.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

# The modules compiled, chosen by profiling the broker at steady (docs/compiled.md).
COMPILED: tuple[str, ...] = (
    "dejaq.core.wire.batches",
    "dejaq.core.wire.flat",
    "dejaq.storage_plugins.memory.blobs",
    "dejaq.storage_plugins.memory.columns",
    "dejaq.storage_plugins.memory.ids",
    "dejaq.storage_plugins.memory.key_lanes",
    "dejaq.storage_plugins.memory.storage",
    "dejaq.storage_plugins.memory.time_index",
    "dejaq.storage_plugins.memory.timeline",
    "dejaq.broker.dispatch.window",
)
# Hand-written C (each ``.c`` beside its user), built and refused with the others.
KERNELS: tuple[str, ...] = (
    "dejaq.storage_plugins.memory.blob_kernel",
    "dejaq.storage_plugins.memory.id_kernel",
    "dejaq.storage_plugins.memory.owner_kernel",
    "dejaq.storage_plugins.memory.select_kernel",
)
# Written by setup.py beside this module: each compiled module's source digest.
MANIFEST = "hotpath_built.json"
PURE_ENV = "DEJAQ_PURE_PYTHON"


def pure_forced() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


# A kernel's own headers: included by quoted name, found beside the .c.
_LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)


def source_files(path: Path) -> list[Path]:
    """What a build of ``path`` is made of: the file, and for C the headers beside it
    that it includes by quoted name (and those they include), each once."""
    files = [path]
    for source in files:  # grows as headers are found
        if source.suffix not in (".c", ".h"):
            continue
        for name in _LOCAL_INCLUDE.findall(source.read_bytes()):
            header = source.parent / name.decode()
            if header.is_file() and header not in files:
                files.append(header)
    return files


def source_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for source in source_files(path):
        digest.update(source.read_bytes())
    return digest.hexdigest()


def _built() -> dict[str, str]:
    try:
        data = json.loads((Path(__file__).parent / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def source_of(module: str, top: Path) -> Path:
    """A compiled module's ``.py`` (a kernel's ``.c``); ``top`` holds the folders
    dejaq.* installs from (each is named as its package: core/, storage_plugins/, ...)."""
    return top.joinpath(*module.split(".")[1:]).with_suffix(".c" if module in KERNELS else ".py")


def _fresh(built: dict[str, str]) -> bool:
    """Whether every compiled module was built from the source beside it. All or
    none: the compiled modules call each other natively, so a compiled module
    must never meet the Python version of another."""
    top = Path(__file__).resolve().parent.parent
    try:
        return all(built.get(m) == source_digest(source_of(m, top)) for m in (*COMPILED, *KERNELS))
    except OSError:
        return False


class _PreferSource(importlib.abc.MetaPathFinder):
    """Loads the ``.py`` of every compiled module when the compiled ones must not
    run, and refuses the kernels then."""

    def __init__(self, pure: bool, built: dict[str, str]) -> None:
        self.pure = pure
        self.built = built
        self.stale = bool(built) and not _fresh(built)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not (self.pure or self.stale):
            return None
        if fullname in KERNELS:
            raise ModuleNotFoundError(f"{fullname} is off: its user runs the Python reference")
        if fullname not in COMPILED or not path:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            source = Path(entry) / f"{leaf}.py"
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def _install() -> _PreferSource:
    for finder in sys.meta_path:
        if isinstance(finder, _PreferSource):
            return finder
    finder = _PreferSource(pure_forced(), _built())
    sys.meta_path.insert(0, finder)
    return finder


def is_compiled(module: ModuleType) -> bool:
    return str(getattr(module, "__file__", "")).endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES)
    )


def kernel(module: str) -> ModuleType | None:
    """A module of ``KERNELS``, or None where it is not built or may not run
    (its user then runs its Python reference)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def status() -> str:
    """One line: which flavour of the hot path this process runs, for ``dejaq --version``."""
    import importlib

    running = [m for m in COMPILED if is_compiled(importlib.import_module(m))]
    built = len(_FINDER.built)
    total = len(COMPILED)
    if len(running) == total:
        kernels = f"{sum(kernel(k) is not None for k in KERNELS)} of {len(KERNELS)} C kernels"
        return f"compiled hot path: active ({total} modules, mypyc; {kernels})"
    if _FINDER.pure and built:
        return f"compiled hot path: off, {PURE_ENV}=1 forces the Python modules"
    if running:
        return f"compiled hot path: partly active ({len(running)} of {total} modules)"
    if _FINDER.stale:
        return "compiled hot path: off, the sources changed since the build (pip install again)"
    return "compiled hot path: not built (pure Python)"


_FINDER = _install()
