"""How often the broker's process runs the cyclic collector's full passes.

Everything built before the broker serves lives as long as it does, so it is
frozen out of the collector's view. What storage builds afterwards (a memory
topic's indexes: lists and dicts with an entry a message) is walked whole by
every full pass: ~20-60 ms for a million waiting messages, a stall of every
delivery. At Python's default pacing (a full pass every ten middle ones, once
the survivors grew by a quarter) a broker draining a campaign at 80k messages
a second ran one every second. The broker's garbage is freed by reference
counting almost all of it (its frames, batches and requests hold no cycles),
so full passes ``FULL_EVERY`` middle passes apart lose nothing but time; the
young generations keep Python's thresholds.
"""

from __future__ import annotations

import gc

FULL_EVERY = 100  # middle-generation passes between two full ones (Python's default: 10)


def settle() -> None:
    """Collect once, freeze what is alive, and space the full passes out."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_EVERY)
