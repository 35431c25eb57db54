"""A due time in epoch seconds is refused by the producer before anything is
sent: stored as milliseconds it would be January 1970, delivered at once."""

from __future__ import annotations

import numpy as np
import pytest

from dejaq.driver import Admin, InvalidArgument, Producer, embedded
from dejaq.driver.producer import Outgoing

pytestmark = pytest.mark.timeout(60)
SECONDS = 1_795_000_000  # 2026-11-18 in epoch seconds
MS = SECONDS * 1000


async def test_a_time_in_seconds_raises_before_anything_is_sent() -> None:
    async with embedded("memory://") as client:
        admin = Admin(client)
        await admin.create_topic("jobs")
        async with Producer(client, "jobs") as producer:
            # When one message, a batch, or columns carry a time in seconds
            with pytest.raises(InvalidArgument, match="give epoch milliseconds, not seconds"):
                await producer.send(b"x", at_ms=SECONDS, id="one")
            with pytest.raises(InvalidArgument, match="message 'b2': timestamp 1795000000"):
                await producer.send_batch([Outgoing(b"x", MS, "b1"), Outgoing(b"x", SECONDS, "b2")])
            with pytest.raises(InvalidArgument, match="nothing was sent"):
                await producer.send_columns(np.array([SECONDS], np.int64), [b"x"], ["c1"])
            # Then none of them was stored, and a time of 0 (now) or in ms still goes
            counts = (await admin.describe_topic("jobs")).counts
            assert counts.waiting == counts.due == 0
            sent = await producer.send_batch([Outgoing(b"x", 0, "now"), Outgoing(b"x", MS, "ms")])
            assert [r.accepted for r in sent] == [True, True]
