"""Topics, insert, and calls on what does not exist."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import pytest

from dejaq.core.errors import (
    AlreadyExists,
    NotFound,
)
from dejaq.core.model import Counts, Topic, TopicSettings, Webhook
from dejaq.storage_plugins import Storage
from dejaq.storage_plugins.base import LeaseRequest
from tests.storage_plugins.conformance.givens import (
    ACCEPTED,
    C1,
    DUPLICATE,
    LEASE,
    NOW,
    T,
    given_messages,
    given_topic,
    lease,
    msg,
)

# -- topics -------------------------------------------------------------------


async def test_a_created_topic_reads_back_unchanged(storage: Storage) -> None:
    topic = await given_topic(storage)
    assert await storage.get_topic(T) == topic


async def test_a_duplicate_topic_is_refused_and_the_first_kept(storage: Storage) -> None:
    first = await given_topic(storage, buckets=4)
    with pytest.raises(AlreadyExists):
        await given_topic(storage, buckets=8)
    assert await storage.get_topic(T) == first


async def test_topics_are_listed_by_name(storage: Storage) -> None:
    for name in ("b", "c", "a"):
        await given_topic(storage, name)
    assert [t.name for t in await storage.list_topics()] == ["a", "b", "c"]


async def test_an_unknown_topic_is_not_found(storage: Storage) -> None:
    assert await storage.list_topics() == []
    with pytest.raises(NotFound):
        await storage.get_topic(T)
    with pytest.raises(NotFound):
        await storage.delete_topic(T)


async def test_deleting_a_topic_deletes_its_messages(storage: Storage) -> None:
    # given a topic with a live and a dead message
    await given_topic(storage)
    await given_messages(storage, msg("live"), msg("dying", expires_at=NOW))
    await lease(storage, limit=1)
    # when it is deleted and created again
    await storage.delete_topic(T)
    assert await storage.list_topics() == []
    await given_topic(storage)
    # then none of its messages remain
    assert await storage.counts(T, NOW) == Counts()
    with pytest.raises(NotFound):
        await storage.get(T, "live")
    assert await storage.insert(T, [msg("live"), msg("dying")]) == [ACCEPTED, ACCEPTED]


async def test_a_deleted_topics_messages_are_gone_for_reads_at_once(storage: Storage) -> None:
    # given a topic with a message leased by C1
    await given_topic(storage)
    await given_messages(storage, msg("a"), msg("b"))
    await lease(storage, limit=1)
    # when it is deleted
    await storage.delete_topic(T)
    # then no read finds its messages, nor a release its leases
    with pytest.raises(NotFound):
        await storage.get(T, "a")
    with pytest.raises(NotFound):
        await storage.scan(T, 0, "", 10)
    with pytest.raises(NotFound):
        await storage.by_due(T, None, 10)
    with pytest.raises(NotFound):
        await storage.counts(T, NOW)
    assert T not in await storage.census(NOW)
    assert await storage.release(T, C1, NOW) == 0


async def test_deleting_one_topic_leaves_the_others(storage: Storage) -> None:
    await given_topic(storage)
    await given_topic(storage, "other")
    await storage.insert("other", [msg("a")])
    await storage.delete_topic(T)
    assert (await storage.get("other", "a")).payload == b"a"


# -- insert -------------------------------------------------------------------


async def test_a_new_message_is_stored_at_version_1(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", ts=NOW + 5, bucket=3, max_deliveries=7, expires_at=9))
    m = await storage.get(T, "m")
    assert (m.id, m.timestamp, m.payload, m.bucket) == ("m", NOW + 5, b"m", 3)
    assert (m.version, m.deliveries, m.lease_owner, m.dead) == (1, 0, None, False)
    assert (m.max_deliveries, m.expires_at) == (7, 9)


async def test_a_duplicate_id_is_reported_and_left_untouched(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", ts=NOW, payload=b"first"))
    statuses = await storage.insert(T, [msg("m", ts=NOW + 9, payload=b"second"), msg("n")])
    assert statuses == [DUPLICATE, ACCEPTED]
    m = await storage.get(T, "m")
    assert (m.timestamp, m.payload, m.version) == (NOW, b"first", 1)


async def test_within_one_batch_the_first_of_a_repeated_id_wins(storage: Storage) -> None:
    await given_topic(storage)
    statuses = await storage.insert(T, [msg("m", payload=b"1"), msg("m", payload=b"2")])
    assert statuses == [ACCEPTED, DUPLICATE]
    assert (await storage.get(T, "m")).payload == b"1"


async def test_a_dead_message_id_is_still_a_duplicate(storage: Storage) -> None:
    # given a message that died of expiry
    await given_topic(storage)
    await given_messages(storage, msg("m", expires_at=NOW))
    assert (await lease(storage)).dead_lettered == 1
    # when it is produced again, then it is a duplicate and stays dead
    assert await storage.insert(T, [msg("m")]) == [DUPLICATE]
    assert (await storage.get(T, "m")).dead


async def test_an_empty_insert_stores_nothing(storage: Storage) -> None:
    await given_topic(storage)
    assert await storage.insert(T, []) == []
    assert await storage.counts(T, NOW) == Counts()


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00", b"\x00bin\x00ary\xff\x00", bytes(range(256)) * 4096],
    ids=["empty", "nul", "binary", "1MiB"],
)
async def test_a_payload_comes_back_byte_for_byte(storage: Storage, payload: bytes) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", payload=payload))
    assert (await storage.get(T, "m")).payload == payload
    [delivery] = (await lease(storage)).delivered
    assert delivery.payload == payload


# -- unknown topic ------------------------------------------------------------

CALLS: dict[str, Callable[[Storage], Awaitable[object]]] = {
    "insert": lambda s: s.insert(T, [msg("m")]),
    "lease": lambda s: s.lease(LeaseRequest.of(T, None, NOW, 1, LEASE, C1, 0)),
    "get": lambda s: s.get(T, "m"),
    "next_due": lambda s: s.next_due(T, None),
    "counts": lambda s: s.counts(T, NOW),
    "move": lambda s: s.move(T, "m", 1, NOW, NOW),
    "cancel": lambda s: s.cancel(T, "m", 1, NOW),
    "ack": lambda s: s.ack(T, [("m", 1)], C1, NOW),
    "list_dead": lambda s: s.list_dead(T, "", 10),
    "redrive": lambda s: s.redrive(T, None, NOW),
    "purge_dead": lambda s: s.purge_dead(T, NOW),
}


@pytest.mark.parametrize("call", list(CALLS))
async def test_a_call_on_an_unknown_topic_is_not_found(storage: Storage, call: str) -> None:
    with pytest.raises(NotFound):
        await CALLS[call](storage)


async def test_an_unknown_message_is_not_found(storage: Storage) -> None:
    await given_topic(storage)
    with pytest.raises(NotFound):
        await storage.get(T, "nobody")


# -- updating a topic's settings ----------------------------------------------


async def test_updated_settings_read_back_and_messages_stay(storage: Storage) -> None:
    topic = await given_topic(storage, buckets=4)
    await given_messages(storage, msg("a", NOW))
    capped = dataclasses.replace(topic, settings=dataclasses.replace(topic.settings, max_rate=50.0))
    await storage.update_topic(capped)
    assert await storage.get_topic(T) == capped
    assert [t.settings.max_rate for t in await storage.list_topics()] == [50.0]
    assert (await storage.counts(T, NOW)).due == 1


async def test_a_pause_and_a_resume_read_back(storage: Storage) -> None:
    # Given a topic paused (its settings say since when)
    topic = await given_topic(storage, buckets=4)
    settings = dataclasses.replace(topic.settings, paused=True, paused_at_ms=NOW)
    paused = dataclasses.replace(topic, settings=settings)
    await storage.update_topic(paused)
    # Then it reads back paused, by name and in the list (a broker restarting finds it so)
    assert await storage.get_topic(T) == paused
    assert [t.settings.paused for t in await storage.list_topics()] == [True]
    # And once resumed, the pause's start and end read back
    settings = dataclasses.replace(settings, paused=False, resumed_at_ms=NOW + 5)
    resumed = dataclasses.replace(topic, settings=settings)
    await storage.update_topic(resumed)
    assert await storage.get_topic(T) == resumed


async def test_a_webhook_and_its_secret_read_back_created_and_updated(storage: Storage) -> None:
    # Given a topic created with a webhook (headers, secret and all)
    hook = Webhook(
        "https://hooks.example.com/in",
        timeout_ms=2500,
        concurrency=7,
        headers=(("Authorization", "Bearer t"), ("X-Env", "prod")),
        secret="whsec_0123456789abcdef",
        backoff_ms=250,
    )
    topic = Topic(T, TopicSettings(buckets=4, webhook=hook), created_at_ms=42)
    await storage.create_topic(topic)
    # Then it reads back the same, by name and in the list
    assert await storage.get_topic(T) == topic
    assert [t.settings.webhook for t in await storage.list_topics()] == [hook]
    # And when its webhook is removed, none reads back
    plain = dataclasses.replace(topic, settings=dataclasses.replace(topic.settings, webhook=None))
    await storage.update_topic(plain)
    assert (await storage.get_topic(T)).settings.webhook is None


async def test_an_update_of_a_missing_or_recreated_topic_is_not_found(storage: Storage) -> None:
    topic = await given_topic(storage, buckets=4)
    changed = dataclasses.replace(topic, settings=dataclasses.replace(topic.settings, max_rate=5.0))
    stale = dataclasses.replace(changed, created_at_ms=topic.created_at_ms - 1)
    with pytest.raises(NotFound):
        await storage.update_topic(stale)
    assert await storage.get_topic(T) == topic
    await storage.delete_topic(T)
    with pytest.raises(NotFound):
        await storage.update_topic(changed)
