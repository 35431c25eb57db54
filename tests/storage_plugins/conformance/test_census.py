"""census: every topic's counts and oldest live timestamp in one call, the same
as ``counts`` and ``next_due`` topic by topic."""

from __future__ import annotations

from dejaq.core.model import Counts
from dejaq.storage_plugins import Storage
from dejaq.storage_plugins.base import TopicCensus
from tests.storage_plugins.conformance.givens import (
    LEASE,
    NOW,
    T,
    given_every_state,
    given_topic,
    msg,
)


async def test_census_of_no_topics_is_empty(storage: Storage) -> None:
    assert await storage.census(NOW) == {}


async def test_census_matches_counts_and_next_due_of_each_topic(storage: Storage) -> None:
    # Given a topic with a message in every state, an empty topic and another
    await given_every_state(storage)
    await given_topic(storage, "empty", buckets=8)
    await given_topic(storage, "other", buckets=2)
    await storage.insert("other", [msg("o", NOW + 5, bucket=1)])
    # When the census is taken
    census = await storage.census(NOW + LEASE)
    # Then it holds every topic, as counts and next_due tell them one by one.
    assert census == {
        T: TopicCensus(4, Counts(waiting=1, due=2, leased=1, dead=1), NOW + LEASE // 2),
        "empty": TopicCensus(8, Counts(), None),
        "other": TopicCensus(2, Counts(waiting=0, due=1), NOW + 5),
    }
    for name, entry in census.items():
        assert entry.counts == await storage.counts(name, NOW + LEASE)
        assert entry.oldest == await storage.next_due(name, None)


async def test_census_forgets_a_deleted_topic(storage: Storage) -> None:
    await given_topic(storage, "gone")
    await given_topic(storage, "kept")
    await storage.delete_topic("gone")
    assert set(await storage.census(NOW)) == {"kept"}
