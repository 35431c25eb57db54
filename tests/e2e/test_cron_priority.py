"""Cron entries on a priority topic against a real broker process, on each
storage backend: every occurrence has its entry's priority, is never delivered
before its time, and goes out most urgent first, to a consumer waiting for it
and from a backlog (FIFO within a priority, by occurrence)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dejaq.core.model import KIND_PRIORITY
from dejaq.driver.client import Client
from dejaq.driver.consumer import Delivery
from dejaq.driver.cron import Cron
from tests.e2e.broker_process import StartBroker
from tests.e2e.support import (
    ack_all,
    consuming,
    counts,
    create_topic,
    now_ms,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)
ENTRIES = (("lax", 7), ("urgent", 0), ("mid", 3))  # added in this order
BY_PRIORITY = ("urgent", "mid", "lax")


async def add_entries(client: Client, topic: str) -> tuple[int, int]:
    """Three entries firing at the same two whole seconds, 2-3 s from now: those two."""
    first = (now_ms() // 1000 + 3) * 1000
    second = first + 1000
    cron = Cron(client)
    for id, priority in ENTRIES:
        entry = await cron.add(
            topic, id, "* * * * * *", b"x", start_ms=first, end_ms=second, priority=priority
        )
        assert (entry.priority, entry.next_ms) == (priority, first)
    return first, second


def assert_never_early(got: Sequence[Delivery]) -> None:
    for d in got:
        occurred = int(d.id.rsplit("@", 1)[1])
        assert d.received_at_ms >= occurred, f"{d.id} delivered early"
        assert d.timestamp_ms >= occurred, f"{d.id} available early"


async def a_backlog_goes_out_most_urgent_first(client: Client, topic: str) -> None:
    # Given a priority topic, its entries' occurrences all due with no consumer
    await create_topic(client, topic, kind=KIND_PRIORITY, priorities=10)
    first, second = await add_entries(client, topic)

    async def all_due() -> bool:
        return now_ms() > second and (await counts(client, topic))[:2] == (0, 6)

    await wait_until(all_due, timeout_s=15, what="six occurrences due")
    # When a consumer comes
    async with consuming(client, topic, credits=100) as inbox:
        got = await inbox.take(6)
        await ack_all(got)
    # Then the most urgent come first, each priority's occurrences in their order
    assert [d.id for d in got] == [f"{id}@{t}" for id in BY_PRIORITY for t in (first, second)]
    assert [d.priority for d in got] == [0, 0, 3, 3, 7, 7]
    assert_never_early(got)


async def test_a_waiting_consumer_gets_each_occurrence_at_its_time_most_urgent_first(
    client: Client, topic_name: str
) -> None:
    # Given a consumer waiting on a priority topic
    topic = await create_topic(client, topic_name, kind=KIND_PRIORITY, priorities=10)
    async with consuming(client, topic, credits=100) as inbox:
        # When entries of three priorities fire at the same two seconds
        first, second = await add_entries(client, topic)
        got = await inbox.take(6, timeout_s=15)
        await ack_all(got)
    # Then each second's occurrences come at that second, the most urgent first
    assert [d.id for d in got] == [f"{id}@{t}" for t in (first, second) for id in BY_PRIORITY]
    assert [d.priority for d in got] == [0, 3, 7, 0, 3, 7]
    assert_never_early(got)


async def test_a_backlog_of_occurrences_goes_out_most_urgent_first(
    client: Client, topic_name: str
) -> None:
    await a_backlog_goes_out_most_urgent_first(client, topic_name)


async def test_a_backlog_of_occurrences_goes_out_most_urgent_first_on_served_storage(
    start_broker: StartBroker, served_url: str, topic_name: str
) -> None:
    broker = start_broker(served_url)
    async with Client(broker.address) as client:
        await a_backlog_goes_out_most_urgent_first(client, topic_name)
