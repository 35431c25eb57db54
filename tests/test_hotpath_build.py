"""The builds of the hot path: ``python -m build`` makes a platform wheel with
every compiled module in it, and with no C compiler the package still builds,
installs and runs as pure Python."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from dejaq.core import hotpath

ROOT = Path(__file__).resolve().parents[1]
NO_COMPILER = "no working C compiler: installing the pure-Python modules"


def _env(**extra: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != hotpath.PURE_ENV} | extra


def _wheel(out: Path) -> Path:
    (wheel,) = out.glob("dejaq_timeline-*.whl")
    return wheel


def test_without_a_c_compiler_the_package_installs_and_runs_as_pure_python(
    tmp_path: Path,
) -> None:
    # Given no working C compiler, when the wheel is built
    built = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v"),
            *("--wheel-dir", str(tmp_path / "out"), str(ROOT)),
        ],
        env=_env(CC="/bin/false"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # then the build says so in one line, and the wheel is pure Python
    assert (built.stdout + built.stderr).count(NO_COMPILER) == 1
    wheel = _wheel(tmp_path / "out")
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith(".so")]
    # and, installed on its own, it runs the Python modules
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
        env=_env(),
        capture_output=True,
        check=True,
        timeout=120,
    )
    # The dependencies come from this interpreter's site-packages, whose .pth
    # files (the editable install of this checkout among them) are not read.
    deps = sysconfig.get_paths()["purelib"]
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]];"
        "from dejaq.driver.cli.main import main; import dejaq.storage_plugins.memory.storage as s;"
        "print(s.__file__); main(['--version'])"
    )
    ran = subprocess.run(
        [sys.executable, "-S", "-c", code, str(site), deps],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    where, _, status = ran.stdout.splitlines()
    assert where.startswith(str(site)) and where.endswith(".py")
    assert status == "compiled hot path: not built (pure Python)"


@pytest.mark.long
@pytest.mark.timeout(900)
def test_python_m_build_makes_a_platform_wheel_with_the_compiled_modules(tmp_path: Path) -> None:
    # Given a C compiler (CI has one), when the wheel is built
    built = subprocess.run(
        [
            *(sys.executable, "-m", "build", "--wheel", "--no-isolation"),
            *("--outdir", str(tmp_path), str(ROOT)),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # then it is a wheel for this platform
    wheel = _wheel(tmp_path)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert f"-{tag}-{tag}-" in wheel.name and "-none-any" not in wheel.name
    # holding each compiled module beside its source, and the build's manifest
    names = set(zipfile.ZipFile(wheel).namelist())
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for module in hotpath.COMPILED:
        path = "/".join(module.split("."))
        assert f"{path}{suffix}" in names
        assert f"{path}.py" in names
    # and each C kernel beside its source, which the freshness check reads
    for module in hotpath.KERNELS:
        path = "/".join(module.split("."))
        assert f"{path}{suffix}" in names
        assert f"{path}.c" in names
    assert f"dejaq/core/{hotpath.MANIFEST}" in names


EDITABLE = """
import sys, warnings
from setuptools import build_meta
with warnings.catch_warnings(record=True) as seen:  # as pip's hook runner does
    build_meta.build_editable(sys.argv[1])
for w in seen:
    print(f"{w.category.__name__}: {str(w.message).splitlines()[0]}")
"""


def test_an_editable_install_adds_no_warning_block(tmp_path: Path) -> None:
    # Given a copy of the sources (the build writes beside them) and no C compiler (quick)
    src = tmp_path / "src"
    tops = {
        d.split("/")[0]
        for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
            "package-dir"
        ].values()
    }
    for top in sorted(tops):
        shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    # When the editable wheel is built, as pip does on the first install
    built = subprocess.run(
        [sys.executable, "-c", EDITABLE, str(tmp_path / "out")],
        cwd=src,
        env=_env(CC="/bin/false"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Then it builds, and no warning reaches pip to be shown as a block
    assert built.returncode == 0, built.stderr[-3000:]
    assert list((tmp_path / "out").glob("*.whl"))
    assert "Editable installation" not in built.stdout, built.stdout
