"""Every source package is in the wheel: a folder missing from pyproject.toml's
package list imports fine from a checkout and fails in the image."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    roots = {folder: name for name, folder in config["package-dir"].items()}
    found = set()
    for folder, name in roots.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "generated" in rel.parts or "__pycache__" in rel.parts:
                continue
            found.add(".".join([name, *rel.parts]) if rel.parts else name)
    assert found - listed == set(), "add these to [tool.setuptools] packages"


def test_the_console_files_are_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "dejaq.broker.http.console_files" in config["packages"]
    patterns = config["package-data"]["dejaq.broker.http.console_files"]
    folder = ROOT / "broker" / "http" / "console_files"
    shipped = {p for pattern in patterns for p in folder.glob(pattern)}
    files = set(folder.iterdir())
    assert files and files <= shipped, "add the console's files to package-data"


def test_the_first_install_says_it_takes_minutes_before_it_starts() -> None:
    """Given a first ``scripts/serve.sh`` (minutes of quiet pip), then the line
    printed before the first install says how long to expect."""
    lines = (ROOT / "scripts" / "bootstrap.sh").read_text().splitlines()
    first_pip = next(i for i, line in enumerate(lines) if "pip install" in line)
    said = " ".join(line for line in lines[:first_pip] if "echo" in line or '"' in line)
    assert "installing" in said and "few minutes" in said
