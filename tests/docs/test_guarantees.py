"""The docs' "Guarantees" list names tests that exist: each ``file::test``
it cites is a test function in that file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def guarantees() -> str:
    readme = (ROOT / "docs" / "concepts.md").read_text()
    start = readme.index("## Guarantees")
    end = readme.find("\n## ", start + 1)
    return readme[start : end if end != -1 else len(readme)]


def test_every_test_the_guarantees_cite_exists() -> None:
    cited = CITED.findall(guarantees())
    assert len(cited) >= 10
    missing = [
        f"{path}::{name}"
        for path, name in cited
        if not re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.MULTILINE)
    ]
    assert missing == []
