"""The storage server's clock, as one broker reads it: the one clock that judges
"due" and lease expiry when several brokers share Redis or PostgreSQL.

Each broker's own wall clock may run ahead or behind; a broker ahead would
deliver early and take a message whose lease another broker still holds. So
brokers on a served backend read time as the storage server's clock, through
an offset measured in round trips:

- A sample asks the server for its time ``s`` between two local readings
  ``t0`` and ``t1`` of the monotonic clock. The server read its clock somewhere
  in ``[t0, t1]``, so its offset to our monotonic clock lies in ``[s - t1,
  s - t0]``: the midpoint, give or take half the round trip.
- The safe side is the smallest offset, ``s - t1`` (midpoint minus half the
  round trip): our "now" is then never after the server's, so nothing is due
  early and no lease looks expired before it is, by the server's clock.
- Of ``SAMPLES`` samples the one with the shortest round trip wins (the
  tightest bound); they are taken again every ``refresh_ms``.
- Between refreshes time runs on the monotonic clock, which a wall-clock step
  (NTP, an operator, faketime) does not move; its drift against the server
  (well under ``DRIFT_PPM``) is subtracted as time passes, so even that keeps
  to the safe side.

The dispatcher's look-ahead window, settles (extend, nack), move, cancel and
release all read this clock (``BrokerContext.clock``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from dejaq.broker.tasks import pause
from dejaq.core.clock import Wake
from dejaq.core.errors import DejaqError
from dejaq.storage_plugins.base import Storage

log = logging.getLogger(__name__)

SAMPLES = 5
DRIFT_PPM = 100  # a generous bound on two quartz clocks' relative drift (each ~±30 ppm)
JUMP_LOG_MS = 50  # an offset that moves more than this between refreshes is logged


def _mono_us() -> int:
    return time.monotonic_ns() // 1_000


class StorageClock:
    """A ``Clock`` that reads the storage server's time (see the module)."""

    def __init__(self, storage: Storage, refresh_ms: int = 5_000) -> None:
        self._storage = storage
        self.refresh_ms = refresh_ms
        self._offset_us = 0  # server time minus our monotonic clock, safe side
        self._synced_us = 0  # monotonic time of the last measurement
        self.uncertainty_us = 0  # the round trip of the sample kept
        self.synced = False
        # Called after each sync with (offset to the wall clock, uncertainty), in s.
        self.on_sync: Callable[[float, float], None] | None = None

    @property
    def offset_ms(self) -> float:
        """The storage server's clock minus this host's wall clock (ms, safe side)."""
        return (self._offset_us + _mono_us() - time.time_ns() // 1_000) / 1000

    def now_ms(self) -> int:
        mono = _mono_us()
        drift = (mono - self._synced_us) * DRIFT_PPM // 1_000_000
        return (mono + self._offset_us - drift) // 1000

    async def wait_until(self, at_ms: int, wake: Wake) -> None:
        delay_ms = at_ms - self.now_ms()
        if delay_ms > 0:
            await wake.wait(delay_ms / 1000)

    async def sync(self) -> None:
        """Measure the offset again (``SAMPLES`` round trips); raises the storage's
        error when it cannot be reached, keeping the previous offset."""
        best: tuple[int, int] | None = None  # (round trip, offset)
        for _ in range(SAMPLES):
            t0 = _mono_us()
            server = await self._storage.server_time_us()
            t1 = _mono_us()
            if server is None:
                raise DejaqError("the storage has no clock of its own")
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, server - t1)
        assert best is not None
        rtt, offset = best
        moved_ms = abs(offset - self._offset_us) / 1000
        if self.synced and moved_ms > JUMP_LOG_MS:
            log.warning("storage clock: the offset moved by %.1f ms since the last sync", moved_ms)
        self._offset_us, self._synced_us, self.uncertainty_us = offset, t1, rtt
        if not self.synced:
            log.info(
                "storage clock: now judged by the storage server's clock, %+.1f ms from this"
                " host's wall clock (uncertainty %.2f ms)",
                self.offset_ms,
                rtt / 1000,
            )
        self.synced = True
        if self.on_sync is not None:
            self.on_sync(self.offset_ms / 1000, rtt / 1_000_000)

    async def run_forever(self) -> None:
        """Refresh the offset every ``refresh_ms``; a failed refresh keeps the last one."""
        while True:
            await pause(self.refresh_ms / 1000)
            try:
                await self.sync()
            except DejaqError as exc:
                log.warning("storage clock: refresh failed (%s); keeping the last offset", exc)


async def storage_clock(storage: Storage, refresh_ms: int) -> StorageClock | None:
    """A synced clock of ``storage``'s server, or None when the storage has no clock
    of its own (memory, SQLite: the broker's wall clock decides)."""
    if await storage.server_time_us() is None:
        return None
    clock = StorageClock(storage, refresh_ms)
    await clock.sync()
    return clock
