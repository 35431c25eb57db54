"""A pause holds for the whole cluster: three brokers on one store, paused through
one of them, deliver nothing (webhook topics post nothing), keep the pause
across restarts, and deliver the backlog once it is resumed through another."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dejaq.core.model import TopicSettings, Webhook
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.cluster.support import Cluster, Recorder, holder_overlaps, now_ms, wait_converged
from tests.e2e.support import EMPTY, counts, produce, wait_until
from tests.e2e.webhook_sink import Sink

MESSAGES = 30
AHEAD_MS = 1_000  # the first message is due this long after the pause
QUIET_MS = 1_500  # how long past its due time the last message must stay undelivered
DEADLINE_S = 30  # a hang guard, not a measure


async def _all_paused(addresses: Sequence[str], topic: str) -> None:
    """Until every broker describes the topic as paused."""

    async def paused() -> bool:
        for address in addresses:
            async with Client(address) as client:
                if not (await Admin(client).describe_topic(topic)).topic.settings.paused:
                    return False
        return True

    await wait_until(paused, 10, f"every broker to see {topic} paused")


async def _nothing_delivered_until(at_ms: int, delivered: Callable[[], list[str]]) -> None:
    """Until the clock passes ``at_ms``, failing at once on any delivery."""

    def quiet_so_far() -> bool:
        assert delivered() == [], f"delivered while paused: {delivered()}"
        return now_ms() >= at_ms

    await wait_until(quiet_so_far, DEADLINE_S, "the messages to stay due while paused")


def _backlog(base_ms: int) -> list[Outgoing]:
    """MESSAGES messages due 10 ms apart from ``base_ms``, produced latest first."""
    return [Outgoing(b"x", base_ms + 10 * i, id=f"m{i}") for i in reversed(range(MESSAGES))]


async def _consumers(addresses: Sequence[str], topic: str) -> Recorder:
    recorder = Recorder()
    for i, address in enumerate(addresses):
        await recorder.add(f"c{i}", [address], topic)
    await wait_converged(addresses, topic, consumers=len(addresses))
    return recorder


async def test_a_paused_topic_delivers_nothing_keeps_its_pause_and_resumes_in_order(
    cluster: Cluster,
) -> None:
    # Given three brokers with a consumer each, and a topic paused through one of them
    a = [b.address for b in cluster.start(3)]
    topic = "paused"
    async with Client(a[0]) as client:
        await Admin(client).create_topic(topic, TopicSettings(buckets=12))
    recorder = await _consumers(a, topic)
    async with Client(a[1]) as client:
        assert (await Admin(client).pause_topic(topic)).settings.paused
    await _all_paused(a, topic)

    # When messages fall due, produced through another broker
    sent = _backlog(now_ms() + AHEAD_MS)
    last_due = max(m.timestamp_ms for m in sent)
    async with Client(a[2]) as client:
        await produce(client, topic, sent)
    # Then no broker delivers any: they all wait, due, leased to nobody
    try:
        await _nothing_delivered_until(last_due + QUIET_MS, lambda: sorted(recorder.ids()))
    finally:
        await recorder.close()
    async with Client(a[0]) as client:
        assert await counts(client, topic) == (0, MESSAGES, 0, 0)

    # When every broker restarts
    cluster.stop_all()
    a = [b.address for b in cluster.start(3)]
    recorder = await _consumers(a, topic)
    try:
        # Then the topic is still paused and still nothing is delivered
        await _all_paused(a, topic)
        await _nothing_delivered_until(now_ms() + QUIET_MS, lambda: sorted(recorder.ids()))
        # When it is resumed through one broker
        async with Client(a[2]) as client:
            assert not (await Admin(client).resume_topic(topic)).settings.paused
        # Then the backlog goes out: each message once, none early, and each
        # consumer's share in due order
        await recorder.wait_for([m.id for m in sent], timeout_s=DEADLINE_S)
    finally:
        await recorder.close()
    assert sorted(recorder.ids()) == sorted(m.id for m in sent)
    assert not holder_overlaps(recorder.seen)
    assert min(s.lateness_ms for s in recorder.seen) >= 0
    for name in {s.consumer for s in recorder.seen}:
        mine = [s.due_ms for s in recorder.seen if s.consumer == name]
        assert mine == sorted(mine), name


async def test_a_paused_webhook_topic_posts_nothing_until_resumed(cluster: Cluster) -> None:
    # Given three brokers posting one webhook topic, paused through one of them
    sink = await Sink().start()
    a = [b.address for b in cluster.start(3, DEJAQ_WEBHOOK_ALLOW="127.0.0.1")]
    topic = "hooked"
    try:
        async with Client(a[0]) as client:
            settings = TopicSettings(buckets=12, webhook=Webhook(sink.url, backoff_ms=50))
            await Admin(client).create_topic(topic, settings)
            await wait_converged(a, topic, consumers=3)
            await Admin(client).pause_topic(topic)
        await _all_paused(a, topic)
        # When messages fall due
        sent = _backlog(now_ms() + AHEAD_MS)
        async with Client(a[1]) as client:
            await produce(client, topic, sent)
        # Then nothing is posted
        last_due = max(m.timestamp_ms for m in sent)
        await _nothing_delivered_until(last_due + QUIET_MS, lambda: [h.id for h in sink.hits])
        # When it is resumed through another broker
        async with Client(a[2]) as client:
            await Admin(client).resume_topic(topic)

            # Then every message is posted, none before its time, and acked
            await wait_until(
                lambda: sink.ok_ids() == {m.id for m in sent}, DEADLINE_S, "all posted"
            )
            assert all(h.arrived_ms >= h.due_ms for h in sink.hits)

            async def empty() -> bool:
                return await counts(client, topic) == EMPTY

            await wait_until(empty, 15, "all acked")
    finally:
        await sink.stop()
