"""Sending again what a Redis refused without running it, until a deadline.

A failover (a Redis Cluster's, or Sentinel's) takes a moment: the dead master
refuses connections, then a replica is promoted and the clients learn where
it is. A call nothing of which ran is safe to send again: the runners of
``redis+cluster://`` (``cluster``) and ``redis+sentinel://`` (``sentinel``)
send it again, a pause apart, until ``socket_timeout_ms`` has passed since its
first try, then fail with ``StorageUnavailable``, which the broker retries as
a whole. A call that may have run (the connection was lost after sending) is
never sent again here: its caller decides.
"""

from __future__ import annotations

import asyncio
import time

from redis import exceptions as rex

from dejaq.core.backoff import Backoff

RETRY_PAUSE_S = 0.05  # between two tries while a failover or a slot move settles
# One pause, jittered (core/backoff.py): the brokers a failover refused at once
# do not knock together.
PAUSE = Backoff(RETRY_PAUSE_S, RETRY_PAUSE_S)


def refused_connection(exc: BaseException | None) -> bool:
    """The server could not be connected to: nothing of the batch was sent."""
    return isinstance(exc, rex.ConnectionError) and "connecting to" in str(exc)


class Deadline:
    """The tries of one call: ``passed`` once ``seconds`` have gone since it began."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._at = time.monotonic() + seconds

    def passed(self) -> bool:
        return time.monotonic() > self._at

    async def pause(self) -> None:
        """Wait between two tries (the server needs time, not a poll of ours)."""
        await asyncio.sleep(PAUSE.delay(0))
