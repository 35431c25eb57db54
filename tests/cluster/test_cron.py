"""10,000 cron entries firing every 15 seconds across three brokers, one of them
killed with -9 just as the second occurrences are being produced:
no occurrence missed, none doubled, none early. The same with 2,000 entries of
mixed priorities on a priority topic, where an occurrence's time is its
not-before time."""

from __future__ import annotations

import asyncio
import time

import pytest

from dejaq.broker.cron.entries import LEAD_MS
from dejaq.core.model import KIND_PRIORITY, TopicSettings
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
# The entries' period: longer than the lead an occurrence is produced with, so
# the second occurrences are produced after the first are due.
PERIOD = 15_000
# To add the entries before the first occurrence's lead: a margin, and about
# twice what adding an entry takes on a busy 2-core machine (0.8-1.2 ms).
SETUP_MARGIN_MS = 8_000
SETUP_MS_PER_ENTRY = 2


def schedule(first_ms: int) -> str:
    """Every ``PERIOD``, in step with ``first_ms`` (a whole second): ``S/15``
    fires at S, S+15, S+30 and S+45 seconds past each minute."""
    return f"{first_ms // 1000 % (PERIOD // 1000)}/{PERIOD // 1000} * * * * *"


def occurred_ms(occurrence_id: str) -> int:
    """The occurrence time in an occurrence's id (``ENTRY@EPOCH_MS``)."""
    return int(occurrence_id.rsplit("@", 1)[1])


@pytest.mark.parametrize(
    ("settings", "entries"),
    [
        (TopicSettings(buckets=24), 10_000),
        (TopicSettings(buckets=24, kind=KIND_PRIORITY, priorities=10), 2_000),
    ],
    ids=["timeline", "priority"],
)
async def test_cron_entries_survive_a_broker_kill(
    cluster: Cluster, settings: TopicSettings, entries: int
) -> None:
    # Given three brokers with a consumer each (the others as failover)
    brokers = cluster.start(3)
    a = [b.address for b in brokers]
    topic = "periodic"
    ranked = settings.kind == KIND_PRIORITY
    async with Client(a[0]) as admin:
        await Admin(admin).create_topic(topic, settings)
    recorder = Recorder()
    for i in range(3):
        await recorder.add(f"c{i}", a[i:] + a[:i], topic, credits=1000)
    await wait_converged(a, topic, consumers=3)

    # and the entries (of mixed priorities on a priority topic), added through all
    # three brokers, each firing twice a period apart, the first time once all
    # are added and its lead is still ahead (start and end bound them to exactly
    # two occurrences)
    setup_ms = LEAD_MS + SETUP_MARGIN_MS + entries * SETUP_MS_PER_ENTRY
    first = (now_ms() + setup_ms) // 1000 * 1000 + 1000
    second = first + PERIOD
    every = schedule(first)
    clients = [Client(a[i]) for i in range(3)]
    slots = asyncio.Semaphore(64)

    async def add(i: int) -> None:
        async with slots:
            cron = Cron(clients[i % 3])
            priority = i % 10 if ranked else 0
            await cron.add(
                topic, f"e{i}", every, b"x", start_ms=first, end_ms=second, priority=priority
            )

    started = time.monotonic()
    await asyncio.gather(*(add(i) for i in range(entries)))
    added_s = time.monotonic() - started
    for client in clients:
        await client.close()
    assert now_ms() < first - LEAD_MS, "adding took too long for the first occurrence"

    # When broker 1 is killed -9 as the second occurrences are produced
    await asyncio.sleep((second - LEAD_MS + 300 - now_ms()) / 1000)
    killed_at = now_ms()
    brokers[1].kill()

    # Then every occurrence of both periods is delivered, none before its time
    # (by its id: on a priority topic a delivery shows when it became available),
    # none twice
    expected = {f"e{i}@{t}" for i in range(entries) for t in (first, second)}
    try:
        await recorder.wait_for(expected, timeout_s=(second - now_ms()) / 1000 + 60)
    finally:
        await recorder.close()
    assert recorder.ids() == expected
    late = [(occurred_ms(s.id), s.received_ms - occurred_ms(s.id)) for s in recorder.seen]
    early = [s for s in recorder.seen if s.lateness_ms < 0 or s.received_ms < occurred_ms(s.id)]
    assert not early, f"{len(early)} delivered early"
    assert not holder_overlaps(recorder.seen), "an occurrence was held twice or produced again"
    late_first = [ms for at, ms in late if at == first]
    late_second = [ms for at, ms in late if at == second]
    again = len(recorder.seen) - len(expected)
    print(
        f"\n{entries:,} {settings.kind} entries added in {added_s:.1f} s; broker 1 killed"
        f" {second - killed_at} ms before the second occurrence"
        f"\nfirst occurrence lateness:  {figures(late_first)}"
        f"\nsecond occurrence lateness: {figures(late_second)}"
        f"\nredeliveries (the killed broker's consumer's leases): {again}"
    )
