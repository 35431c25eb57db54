"""10,000 cron entries firing every minute across three brokers, one of them
killed with -9 just as the second minute's occurrences are being produced:
no occurrence missed, none doubled, none early."""

from __future__ import annotations

import asyncio
import time

import pytest

from dejaq.broker.cron.entries import LEAD_MS
from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.cron import Cron
from tests.cluster.support import (
    Cluster,
    Recorder,
    figures,
    holder_overlaps,
    now_ms,
    wait_converged,
)

pytestmark = pytest.mark.timeout(420)
ENTRIES = 10_000
MINUTE = 60_000
SETUP_MS = 40_000  # to add the entries and let them fire before the first minute


async def test_ten_thousand_minutely_entries_survive_a_broker_kill(cluster: Cluster) -> None:
    # Given three brokers with a consumer each (the others as failover)
    brokers = cluster.start(3)
    a = [b.address for b in brokers]
    topic = "minutely"
    async with Client(a[0]) as admin:
        await Admin(admin).create_topic(topic, TopicSettings(buckets=24))
    recorder = Recorder()
    for i in range(3):
        await recorder.add(f"c{i}", a[i:] + a[:i], topic, credits=1000)
    await wait_converged(a, topic, consumers=3)

    # and 10,000 entries, added through all three brokers, each firing on the next
    # two whole minutes (start and end bound them to exactly two occurrences)
    first = (now_ms() + SETUP_MS) // MINUTE * MINUTE + MINUTE
    second = first + MINUTE
    clients = [Client(a[i]) for i in range(3)]
    slots = asyncio.Semaphore(64)

    async def add(i: int) -> None:
        async with slots:
            cron = Cron(clients[i % 3])
            await cron.add(topic, f"e{i}", "* * * * *", b"x", start_ms=first, end_ms=second)

    started = time.monotonic()
    await asyncio.gather(*(add(i) for i in range(ENTRIES)))
    added_s = time.monotonic() - started
    for client in clients:
        await client.close()
    assert now_ms() < first - LEAD_MS, "adding took too long for the first minute"

    # When broker 1 is killed -9 as the second minute's occurrences are produced
    await asyncio.sleep((second - LEAD_MS + 300 - now_ms()) / 1000)
    killed_at = now_ms()
    brokers[1].kill()

    # Then every occurrence of both minutes is delivered, none early, none twice
    expected = {f"e{i}@{t}" for i in range(ENTRIES) for t in (first, second)}
    try:
        await recorder.wait_for(expected, timeout_s=(second - now_ms()) / 1000 + 60)
    finally:
        await recorder.close()
    assert recorder.ids() == expected
    early = [s for s in recorder.seen if s.lateness_ms < 0]
    assert not early, f"{len(early)} delivered early"
    assert not holder_overlaps(recorder.seen), "an occurrence was held twice or produced again"
    late_first = [s.lateness_ms for s in recorder.seen if s.due_ms == first]
    late_second = [s.lateness_ms for s in recorder.seen if s.due_ms == second]
    again = len(recorder.seen) - len(expected)
    print(
        f"\n{ENTRIES:,} entries added in {added_s:.1f} s; broker 1 killed"
        f" {second - killed_at} ms before the second minute"
        f"\nfirst minute lateness:  {figures(late_first)}"
        f"\nsecond minute lateness: {figures(late_second)}"
        f"\nredeliveries (the killed broker's consumer's leases): {again}"
    )
