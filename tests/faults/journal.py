"""What the fault run's processes record: one JSON object a line, one file per
process, flushed line by line (a process frozen or killed loses nothing it
wrote). Times are epoch ms by the machine's true clock, never a broker's.

Records (``k`` is the kind):

- ``send``: a producer is about to send ``id`` to ``topic``, due at ``due``;
- ``sent``: the broker answered its produce with ``status`` (accepted,
  duplicate or rejected), or ``failed`` with ``error`` after every retry;
- ``deliver``: consumer ``consumer`` received ``id`` at ``recv`` through
  ``broker``, with the message's ``version``, ``deliveries``, ``due`` (its
  timestamp before this lease) and ``lease_until``;
- ``ack``: its ack of that delivery (``version``) was confirmed at ``at``
  (``ok``), or refused with ``error``;
- ``ready``: a consumer process has its streams open;
- ``fault``: the harness injected ``kind`` on ``target`` from ``start`` to ``end``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

Record = dict[str, Any]


class Journal:
    """Appends records to one file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] = path.open("a", buffering=1)

    def write(self, k: str, /, **fields: Any) -> None:
        self._file.write(json.dumps({"k": k, **fields}) + "\n")

    def close(self) -> None:
        self._file.close()


def read_all(folder: Path, pattern: str = "*.jsonl") -> Iterator[Record]:
    """Every whole record of every journal in ``folder`` (a line cut short by a
    kill is skipped)."""
    for path in sorted(folder.glob(pattern)):
        for line in path.read_text().splitlines():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue
