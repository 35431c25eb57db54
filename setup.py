"""The build: pyproject.toml says everything else; this adds the compiled hot path.

The modules named by ``COMPILED`` in core/hotpath.py are compiled with mypyc
(a build dependency from PyPI) and the system C compiler into extension
modules beside their ``.py``, and the hand-written C of ``KERNELS`` beside
its ``.c``. With no working compiler, or with
``DEJAQ_PURE_PYTHON=1`` at build time, the package installs as pure Python
and this script says so in one line. Either way the ``.py`` files ship, so
``DEJAQ_PURE_PYTHON=1`` can choose them at run time.
"""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import shutil
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.warnings import InformationOnly

ROOT = Path(__file__).resolve().parent
HOTPATH = runpy.run_path(str(ROOT / "core" / "hotpath.py"), run_name="dejaq_hotpath_build")
COMPILED: tuple[str, ...] = HOTPATH["COMPILED"]
KERNELS: tuple[str, ...] = HOTPATH["KERNELS"]
# The source folders install as dejaq.* through package-dir, which mypy cannot
# follow: it reads them through a symlinked dejaq/ tree (as scripts/lint.sh does).
TOP = ("core", "proto", "fbs", "broker", "driver", "storage_plugins", "outbox")
TREE = ROOT / "build" / "mypyc-src"
GROUP = "dejaq.core.hotpath_native"  # the one shared library the modules compile into
OUT = ROOT / "build" / "mypyc"
# Compiled C files by the digest of all that makes them, so a build of the same
# C (the wheel after the editable install, a rebuild after one module changed)
# compiles only what differs.
OBJECTS = ROOT / "build" / "mypyc-objects"
# The C compiler's level, chosen by measurement (docs/compiled.md): -O1 saves a
# third of the compile's CPU but runs the hot path slower; -O2 saves nothing.
# DEJAQ_HOTPATH_OPT overrides it, to compare.
OPT_LEVEL = os.environ.get("DEJAQ_HOTPATH_OPT", "3")


def say(line: str) -> None:
    print(f"dejaq: {line}", file=sys.stderr, flush=True)


def compiler_works() -> bool:
    """Whether the C compiler setuptools would use compiles and links a trivial file."""
    from setuptools._distutils import ccompiler, sysconfig

    cc: Any = ccompiler.new_compiler()
    sysconfig.customize_compiler(cc)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "probe.c")
        src.write_text("int main(void) { return 0; }\n")
        try:
            objects = cc.compile([str(src)], output_dir=tmp)
            cc.link_executable(objects, "probe", output_dir=tmp)
        except Exception:  # each setuptools release raises its own error classes here
            return False
    return True


def mypyc_version() -> str:
    from importlib.metadata import version

    return version("mypy")


def source_tree() -> list[str]:
    TREE.joinpath("dejaq").mkdir(parents=True, exist_ok=True)
    for pkg in TOP:
        link = TREE / "dejaq" / pkg
        if not link.is_symlink():
            link.symlink_to(ROOT / pkg, target_is_directory=True)
    return [str(Path("dejaq", *m.split(".")[1:]).with_suffix(".py")) for m in COMPILED]


def compiled_extensions() -> list[Any]:
    if os.environ.get(HOTPATH["PURE_ENV"], "") not in ("", "0"):
        say(f"{HOTPATH['PURE_ENV']} is set: installing the pure-Python modules, nothing compiled")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        say("mypyc is not installed: installing the pure-Python modules, nothing compiled")
        return []
    if not compiler_works():
        say("no working C compiler: installing the pure-Python modules, nothing compiled")
        return []
    files = source_tree()
    cwd = Path.cwd()
    os.chdir(TREE)  # mypy names each module from the folders under the current one
    try:
        extensions = mypycify(
            ["--config-file", str(ROOT / "pyproject.toml"), "--explicit-package-bases", *files],
            group_name=GROUP,
            target_dir=str(OUT),
            opt_level=OPT_LEVEL,
            multi_file=True,  # a C file a module, compiled side by side (BuildHotPath)
        )
    finally:
        os.chdir(cwd)
    for ext in extensions:
        ext.sources = [s if os.path.isabs(s) else str(TREE / s) for s in ext.sources]
        # The group's header sits in its package's folder, the modules' C files above it.
        ext.include_dirs.append(str(OUT.joinpath(*GROUP.split(".")[:-1])))
    # Built with the mypyc modules or not at all: core/hotpath.py lets both run or neither.
    for kernel in KERNELS:
        source, *headers = HOTPATH["source_files"](HOTPATH["source_of"](kernel, ROOT))
        extensions.append(
            Extension(
                kernel,
                [str(source.relative_to(ROOT))],
                depends=[str(h.relative_to(ROOT)) for h in headers],  # rebuilt when one changes
                extra_compile_args=[f"-O{OPT_LEVEL}"],
            )
        )
    say(f"compiling the hot path with mypyc: {len(COMPILED)} modules, and {len(KERNELS)} C kernels")
    return extensions


class BuildHotPath(build_ext):
    """Builds the extensions, compiling their C files on every core at once,
    then records the digest of each compiled source, so the import finder in
    core/hotpath.py can tell a stale build from a fresh one."""

    def build_extension(self, ext: Any) -> None:
        compile_all = self.compiler.compile
        # Everything a C file's object depends on besides its own text: the
        # group's headers, mypyc's runtime (by version), Python and the flags.
        common = hashlib.sha256(
            json.dumps([sys.version, mypyc_version(), self.compiler.compiler_so]).encode()
        )
        for header in sorted(OUT.rglob("*.h")):
            common.update(header.read_bytes())

        def compile_one(source: str, **kwargs: Any) -> list[str]:
            key = common.copy()
            # Not where the object goes: an editable install builds in a fresh temporary folder.
            setting = {k: v for k, v in kwargs.items() if k != "output_dir"}
            key.update(json.dumps(setting, default=str, sort_keys=True).encode())
            for part in HOTPATH["source_files"](Path(source)):  # a kernel's headers too
                key.update(part.read_bytes())
            cached = OBJECTS / f"{key.hexdigest()}.o"
            (obj,) = self.compiler.object_filenames([source], output_dir=kwargs["output_dir"])
            if cached.is_file():
                Path(obj).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(cached, obj)
                return [obj]
            objects: list[str] = compile_all([source], **kwargs)
            OBJECTS.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(f".{os.getpid()}.tmp")
            shutil.copyfile(obj, partial)
            partial.replace(cached)
            return objects

        def compile_each(sources: list[str], **kwargs: Any) -> list[str]:
            # The biggest file first, so the last to finish is a small one.
            order = sorted(sources, key=lambda s: -Path(s).stat().st_size)
            with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                built = pool.map(lambda s: compile_one(s, **kwargs), order)
                done = dict(zip(order, built, strict=True))
            return [obj for source in sources for obj in done[source]]

        self.compiler.compile = compile_each
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_all

    def run(self) -> None:
        super().run()
        if not self.extensions:
            return
        digests = {
            m: HOTPATH["source_digest"](HOTPATH["source_of"](m, ROOT))
            for m in (*COMPILED, *KERNELS)
        }
        build_py = self.get_finalized_command("build_py")
        core = Path(build_py.get_package_dir("dejaq.core"))
        out = core if self.inplace else Path(self.build_lib, "dejaq", "core")
        out.mkdir(parents=True, exist_ok=True)
        (out / HOTPATH["MANIFEST"]).write_text(json.dumps(digests, indent=1) + "\n")

    def get_outputs(self) -> list[str]:
        outputs: list[str] = super().get_outputs()
        if self.extensions and not self.inplace:
            outputs.append(str(Path(self.build_lib, "dejaq", "core", HOTPATH["MANIFEST"])))
        return outputs


# setuptools notes, on every editable install through package-dir, that a folder
# named like the package (dejaq/) in the working directory would shadow it;
# there is none here (the source folders are core/, broker/, ...), and pip
# shows the note as a BuildBackendWarning block on every first install.
warnings.filterwarnings("ignore", message="Editable installation", category=InformationOnly)

# Only the commands that build code compile (pip also runs this for metadata).
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "install", "develop"}
setup(
    ext_modules=compiled_extensions() if BUILDS & set(sys.argv[1:]) else [],
    cmdclass={"build_ext": BuildHotPath},
)
