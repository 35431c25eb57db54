"""A refresh loop on a budget, for the gauges that read storage.

The next refresh waits at least ``BUDGET`` times as long as the last one took
(and at least the interval), so a slow storage read never takes over the
broker; a failed refresh is logged and the loop goes on, since metrics must
never take the broker down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from dejaq.broker.tasks import pause
from dejaq.core.errors import DejaqError

log = logging.getLogger(__name__)
BUDGET = 10  # a refresh takes at most 1/BUDGET of the time (at least the interval apart)


async def refresh_forever(
    what: str, refresh: Callable[[], Awaitable[None]], interval_ms: int
) -> None:
    """Run ``refresh`` for ever, ``interval_ms`` apart or more (``what`` names it in the log)."""
    while True:
        started = time.monotonic()
        try:
            await refresh()
        except DejaqError as exc:
            log.debug("%s refresh skipped: %s", what, exc)
        except Exception:
            log.exception("%s refresh failed", what)
        took = time.monotonic() - started
        await pause(max(interval_ms / 1000, BUDGET * took))
