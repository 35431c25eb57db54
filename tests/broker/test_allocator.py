"""A large buffer freed goes back to the OS at once under the broker's allocator setting.

glibc raises its mmap threshold to the size of each large block freed, so a
second 30 MB buffer comes from the heap and stays there once freed: the
process's resident memory never comes down. The check runs in a process of
its own, so no earlier test's allocations or setting count.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(60)

FRAME = 30_000_000  # a garbage produce frame's size
ALLOWED_MIB = 8  # what may stay resident after the frames: well under one frame

# Prints the resident MiB gained after making and freeing frames of about
# FRAME bytes, each a little smaller than the last (a frame and its copy, each
# written through, as a received frame is).
PROGRAM = textwrap.dedent(
    f"""
    import os
    from dejaq.broker.allocator import give_back_large_blocks
    assert give_back_large_blocks()

    def resident():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    before = resident()
    for i in range(4):
        frame = b"x" * ({FRAME} - i * 1_000_000)
        copy = bytearray(frame)
        del frame, copy
    print((resident() - before) >> 20)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc: Linux only")
def test_large_frames_freed_leave_no_resident_memory_behind() -> None:
    # Given a process with the broker's allocator setting (none given in its environment)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    # When large frames are made and freed one after another
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    # Then the memory they took is resident no more.
    assert int(done.stdout) <= ALLOWED_MIB
