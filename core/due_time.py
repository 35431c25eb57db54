"""The times a message may be due: epoch milliseconds, from 2001-09-09 to
9999-12-31, or 0 (now; where a time may be left out: none).

Every other time below 10^12 ms (2001-09-09T01:46:40Z) is refused: the dates that
could be meant then are long past, while the epoch *seconds* of any date
from 1970 to 33658 fall there, and stored as milliseconds they would mean
January 1970: due at once, silently. A due time in the past is still legal
(it means now); this only refuses one that can only be a unit mistake.
Applied where a time comes in (the broker's API, the driver, the CLI),
never inside storage.
"""

from __future__ import annotations

from dejaq.core.bounds import Bound
from dejaq.core.model import MAX_TIMESTAMP

EARLIEST = 1_000_000_000_000  # 2001-09-09T01:46:40Z
SECONDS = (
    "timestamp {value} is before 2001-09-09 (epoch ms {low}): give epoch milliseconds, not seconds"
)
DUE_TIME = Bound(
    EARLIEST,
    MAX_TIMESTAMP,
    "timestamp {value} is after 9999-12-31 (epoch ms)",
    below=SECONDS,
    or_zero=True,
)
# An expiry time: the same times, 0 for none.
EXPIRY = Bound(
    EARLIEST,
    MAX_TIMESTAMP,
    "expiry: " + DUE_TIME.reason,
    below="expiry: " + SECONDS,
    or_zero=True,
)
