"""``dejaq --version``: the package version, and which flavour of the hot path runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from dejaq.core import hotpath


def text() -> str:
    try:
        version = metadata.version("dejaq-timeline")
    except metadata.PackageNotFoundError:
        version = "(not installed)"
    return f"dejaq {version}\n{hotpath.status()}"


class VersionAction(argparse.Action):
    """Prints ``text()`` and exits; computed only when asked, since finding out
    imports the compiled modules."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(text())
        sys.stdout.flush()
        parser.exit(0)


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action=VersionAction)
