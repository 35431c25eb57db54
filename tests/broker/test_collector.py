"""The broker's process runs the collector's full passes far less often than
Python's default: each walks every index a memory topic holds.

Each count runs in a process of its own, so pytest's own objects and
collector settings do not count.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(60)

# Prints how many full passes ran while a million-entry index stood and
# a million short-lived containers came and went beside it.
PROGRAM = textwrap.dedent(
    """
    import gc, sys
    if sys.argv[1] == "broker":
        from dejaq.broker import collector
        collector.settle()
    full = 0
    def count(phase, info):
        global full
        if phase == "stop" and info["generation"] == 2:
            full += 1
    gc.callbacks.append(count)
    index = [[i] for i in range(1_000_000)]  # a topic's entries, built while serving
    held = []
    for i in range(1_000_000):
        held.append((i, [i]))  # a request's objects, most freed soon, some kept a while
        if len(held) > 5_000:
            held = held[-100:]
    print(full)
    """
)


def full_passes(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True
    )
    return int(out.stdout)


def test_full_passes_run_far_less_often_than_by_default() -> None:
    # Given a process paced as the broker is, and one at Python's default
    # When each builds a large index and then churns short-lived containers
    default, broker = full_passes("default"), full_passes("broker")
    # Then the broker's ran a full pass a third as often or less (the survivors'
    # growth gates some of the default's too)
    assert default >= 8
    assert broker * 3 <= default
