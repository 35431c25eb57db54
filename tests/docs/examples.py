"""The examples of the docs pages, read from their Markdown.

A ```console block is a terminal session: each ``$ `` line is a command (a line
ending in a backslash goes on with the next), the lines below it its output. A
```python block followed by a ```text block is a program and its output. A
```sh block is commands without output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass
class Block:
    page: str
    lang: str
    text: str
    line: int  # where the block starts on its page, for error messages
    output: str | None = None  # a python block's expected output (the text block after it)


@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)


def pages() -> list[Path]:
    """README.md and every page of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    found: list[Block] = []
    previous_end = -1
    for match in FENCE.finditer(text):
        lang, body = match.group(1), match.group(2)
        last = found[-1] if found else None
        if (
            lang == "text"
            and last is not None
            and last.lang == "python"
            and last.output is None
            and text[previous_end : match.start()].strip() == ""
        ):
            last.output = body
        else:
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(str(path.relative_to(ROOT)), lang, body, line))
        previous_end = match.end()
    return found


def session(block: Block) -> list[Step]:
    """The commands of a console block, each with the output lines under it."""
    steps: list[Step] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command + "\n" + lines[i]
            steps.append(Step(command))
        elif steps:
            steps[-1].expected.append(line)
        else:
            raise ValueError(f"{block.page}:{block.line}: output before any command: {line!r}")
        i += 1
    return steps


def shell_commands(block: Block) -> list[str]:
    """The commands of an sh block: lines joined at backslashes, comments and blanks dropped."""
    joined = block.text.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


# Variable parts of an output, made equal on both sides before comparing.
_NORMAL = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?"), "<TIME>"),
    (re.compile(r"\b1[6-9]\d{11}\b"), "<MS>"),
    (re.compile(r"\b[0-9a-f]{11}-[0-9a-f]{8,12}-\d+\b"), "<ID>"),
    (re.compile(r"\bversion \d+"), "version <N>"),
    (re.compile(r"\b\d+\.\d+\.\d+\b"), "<SEMVER>"),
    (re.compile(r"[ \t]+"), " "),
]


def normal(line: str) -> str:
    for pattern, replacement in _NORMAL:
        line = pattern.sub(replacement, line)
    return line.strip()


def matches(expected: list[str], got: list[str]) -> bool:
    """``got`` equals ``expected`` once normalised; ``...`` in a line stands for
    any text, and a line of only ``...`` for any lines."""
    want = [normal(x) for x in expected if x.strip()]
    have = [normal(x) for x in got if x.strip()]
    pattern = []
    for line in want:
        if line == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            parts = [re.escape(p) for p in line.split("...")]
            pattern.append(".*".join(parts) + r"\n")
    return re.fullmatch("".join(pattern), "".join(x + "\n" for x in have)) is not None
