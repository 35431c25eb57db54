"""The architecture page stays true to the code: every module of the broker,
the core and the driver is named on it, and every path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.examples import ROOT

PAGE = ROOT / "docs" / "architecture.md"
TOP = (
    "broker",
    "core",
    "driver",
    "storage_plugins",
    "outbox",
    "bridges",
    "proto",
    "fbs",
    "deploy",
    "benchmarks",
)
QUOTED = re.compile(r"`([^`\s]+)`")


def _modules(root: Path) -> list[Path]:
    """The modules the page must name: broker/ and core/ whole, driver/'s own
    (its cli/ and spark/ subpackages are named as folders)."""
    found = [*(root / "broker").rglob("*.py"), *(root / "core").rglob("*.py")]
    found += (root / "driver").glob("*.py")
    return sorted(p for p in found if p.name != "__init__.py")


def unnamed_modules(page: str, root: Path) -> list[str]:
    quoted = set(QUOTED.findall(page))
    missing = []
    for module in _modules(root):
        relative = module.relative_to(root)
        folder = f"{relative.parent}/"
        if str(relative) in quoted or (module.name in quoted and folder in quoted):
            continue
        missing.append(str(relative))
    return missing


def missing_paths(page: str, root: Path) -> list[str]:
    return [
        token
        for token in sorted(set(QUOTED.findall(page)))
        if token.split("/")[0] in TOP and "/" in token and not (root / token).exists()
    ]


def test_every_module_is_on_the_architecture_page() -> None:
    assert unnamed_modules(PAGE.read_text(), ROOT) == []


def test_every_path_the_architecture_page_names_exists() -> None:
    assert missing_paths(PAGE.read_text(), ROOT) == []
