"""No file of the project tells how it was built: its history lives in git and
in CHANGELOG.md. A tracked file naming a numbered work session, an issue number
or a benchmark record named after a session fails this test."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Bracketed letters keep this file from matching its own pattern.
HISTORY = re.compile(
    r"sessio[n] ?#?[0-9]|issu[e] ?#?[0-9]|roun[d] of|this roun[d]\b|record_[s][0-9]", re.I
)
ALLOWED = {"CHANGELOG.md"}


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [name for name in out.decode().split("\0") if name and name not in ALLOWED]


def test_no_file_speaks_of_its_own_development_history() -> None:
    files = tracked_files()
    assert len(files) > 100
    found = []
    for name in files:
        path = ROOT / name
        if not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue  # binary
        for number, line in enumerate(text.splitlines(), 1):
            if HISTORY.search(line) or HISTORY.search(name):
                found.append(f"{name}:{number}: {line.strip()[:120]}")
    assert found == []
