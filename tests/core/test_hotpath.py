"""Which flavour of the hot path loads: the compiled modules, or their ``.py``
under ``DEJAQ_PURE_PYTHON=1`` or when a source changed since the build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dejaq.core import hotpath

ROOT = Path(__file__).resolve().parents[2]
TOP = Path(hotpath.__file__).resolve().parent.parent  # the folders dejaq.* installs from

PROBE = """
import importlib, json
from dejaq.core import hotpath
files = {m: importlib.import_module(m).__file__ for m in hotpath.COMPILED}
print(json.dumps({"files": files, "status": hotpath.status()}))
"""


def _probe(**env: str) -> dict[str, object]:
    run_env = {k: v for k, v in os.environ.items() if k != hotpath.PURE_ENV} | env
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=run_env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def _digests() -> dict[str, str]:
    built = (*hotpath.COMPILED, *hotpath.KERNELS)
    return {m: hotpath.source_digest(hotpath.source_of(m, TOP)) for m in built}


def _package_path(module: str) -> list[str]:
    return [str(hotpath.source_of(module, TOP).parent)]


def test_pure_python_forced_loads_every_module_from_its_source() -> None:
    # Given DEJAQ_PURE_PYTHON=1, when a fresh interpreter imports the hot path
    probe = _probe(DEJAQ_PURE_PYTHON="1")
    # then every module is the .py, and the status line says so
    files = probe["files"]
    assert isinstance(files, dict)
    assert sorted(files) == sorted(hotpath.COMPILED)
    assert all(str(f).endswith(".py") for f in files.values())
    assert "compiled hot path: active" not in str(probe["status"])


def test_a_built_hot_path_loads_compiled_all_together() -> None:
    # Given this install (the build writes its manifest when it compiled)
    built = (Path(hotpath.__file__).parent / hotpath.MANIFEST).is_file()
    probe = _probe()
    files = probe["files"]
    assert isinstance(files, dict)
    compiled = [m for m, f in files.items() if not str(f).endswith(".py")]
    # then all of the modules are compiled, or none: never a mix
    assert len(compiled) in (0, len(hotpath.COMPILED))
    # and a fresh build is the one that runs, as the status line says
    if built and hotpath._fresh(hotpath._built()):
        assert len(compiled) == len(hotpath.COMPILED)
        assert str(probe["status"]).startswith("compiled hot path: active")
    else:
        assert compiled == []


def _assert_compiled_load_as_source(finder: hotpath._PreferSource) -> None:
    for module in hotpath.COMPILED:
        spec = finder.find_spec(module, _package_path(module))
        assert spec is not None and str(spec.origin).endswith(".py")


def test_a_changed_source_makes_every_module_load_from_its_source() -> None:
    # Given a build whose recorded digest of one module no longer matches its source
    stale = _digests() | {hotpath.COMPILED[0]: "0" * 64}
    finder = hotpath._PreferSource(pure=False, built=stale)
    # then every compiled module, not only the changed one, is found as its .py
    _assert_compiled_load_as_source(finder)


def test_a_changed_kernel_source_makes_every_module_load_from_its_source() -> None:
    # Given a build whose recorded digest of a kernel's C no longer matches it
    stale = _digests() | {hotpath.KERNELS[0]: "0" * 64}
    finder = hotpath._PreferSource(pure=False, built=stale)
    # then the compiled modules are found as their .py, and every kernel is refused
    _assert_compiled_load_as_source(finder)
    for module in hotpath.KERNELS:
        with pytest.raises(ModuleNotFoundError):
            finder.find_spec(module, _package_path(module))


def test_a_kernels_digest_covers_the_headers_it_includes_from_its_folder(tmp_path: Path) -> None:
    # Given a kernel's .c including a header beside it, which includes another,
    # and a system header that is not the kernel's own
    kernel = tmp_path / "k.c"
    kernel.write_text('#include "a.h"\n#include <Python.h>\nint f(void);\n')
    (tmp_path / "a.h").write_text('  # include "b.h"\n#define A 1\n')
    (tmp_path / "b.h").write_text("#define B 1\n")
    # then its build is made of the three, each once
    assert hotpath.source_files(kernel) == [kernel, tmp_path / "a.h", tmp_path / "b.h"]
    # and an edit of the header a header includes changes the kernel's digest,
    # so a build recorded before the edit is stale
    before = hotpath.source_digest(kernel)
    (tmp_path / "b.h").write_text("#define B 2\n")
    assert hotpath.source_digest(kernel) != before


def test_the_kernels_shared_header_is_part_of_each_kernels_build() -> None:
    for module in hotpath.KERNELS:
        names = [p.name for p in hotpath.source_files(hotpath.source_of(module, TOP))]
        assert names[1:] == ["kernel_buffer.h"], module


def test_pure_python_forced_refuses_the_kernels() -> None:
    finder = hotpath._PreferSource(pure=True, built=_digests())
    for module in hotpath.KERNELS:
        with pytest.raises(ModuleNotFoundError):
            finder.find_spec(module, _package_path(module))


def test_a_fresh_build_leaves_the_compiled_modules_to_the_import_system() -> None:
    finder = hotpath._PreferSource(pure=False, built=_digests())
    built = (*hotpath.COMPILED, *hotpath.KERNELS)
    assert all(finder.find_spec(m, _package_path(m)) is None for m in built)
    # and a module that is not compiled is never touched
    assert finder.find_spec("dejaq.core.model", [str(TOP / "core")]) is None


@pytest.mark.parametrize(("value", "forced"), [("1", True), ("0", False), ("", False)])
def test_only_a_set_variable_forces_pure_python(
    value: str, forced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hotpath.PURE_ENV, value)
    assert hotpath.pure_forced() is forced


def test_dejaq_version_names_the_flavour() -> None:
    env = {k: v for k, v in os.environ.items() if k != hotpath.PURE_ENV}
    out = subprocess.run(
        [sys.executable, "-m", "dejaq.driver.cli.main", "--version"],
        env=env | {hotpath.PURE_ENV: "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("dejaq ")
    assert lines[1].startswith("compiled hot path: ")
    assert "active" not in lines[1]
    assert len(lines) == 2
