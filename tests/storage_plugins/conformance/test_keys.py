"""Keys and headers: stored with a message and returned everywhere; a lease
pass shares its limit among the keys with due messages (max-min fair), each
key's messages in timestamp order; ``caps`` bound a key; the busiest keys."""

from __future__ import annotations

from collections import Counter

from dejaq.core import headers as hdrs
from dejaq.core.model import KIND_PRIORITY, Topic, TopicSettings
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    C1,
    C2,
    LEASE,
    NOW,
    T,
    given_messages,
    given_topic,
    ids,
    lease,
    msg,
)

H = hdrs.encode({"content-type": "application/json", "traceparent": "00-abc-def-01"})


def keys_of(leases: object) -> Counter[str]:
    return Counter(d.key for d in leases.delivered)  # type: ignore[attr-defined]


# -- stored and returned ------------------------------------------------------


async def test_a_key_and_headers_come_back_from_every_read(storage: Storage) -> None:
    # given a message with a key and headers, and one with neither
    await given_topic(storage)
    await given_messages(
        storage, msg("k", NOW, bucket=1, key="tenant-7", headers=H), msg("plain", NOW, bucket=1)
    )
    # then get, scan, by_due and the lease pass return them as stored
    got = await storage.get(T, "k")
    assert (got.key, got.headers) == ("tenant-7", H)
    assert hdrs.decode(got.headers)["traceparent"] == "00-abc-def-01"
    plain = await storage.get(T, "plain")
    assert (plain.key, plain.headers) == ("", b"")
    page = await storage.scan(T, 1, "", 10)
    assert {(m.id, m.key, m.headers) for m in page.messages} == {
        ("k", "tenant-7", H),
        ("plain", "", b""),
    }
    listed = await storage.by_due(T, None, 10)
    assert {(m.id, m.key, m.headers) for m in listed} == {("k", "tenant-7", H), ("plain", "", b"")}
    leased = {d.id: (d.key, d.headers) for d in (await lease(storage)).delivered}
    assert leased == {"k": ("tenant-7", H), "plain": ("", b"")}


async def test_a_key_in_any_script_survives_every_change(storage: Storage) -> None:
    # given a keyed message with headers, leased, nacked, moved with a new payload
    await given_topic(storage)
    await given_messages(storage, msg("m", NOW, key="ключ-東京", headers=H))
    (d,) = (await lease(storage)).delivered
    (n,) = await storage.nack(T, [(d.id, d.version)], C1, NOW + 5, 0)
    moved = await storage.move(T, "m", n.version, NOW + 50, NOW, payload=b"new")
    # then key and headers are unchanged, and the payload is the new one
    got = await storage.get(T, "m")
    assert (got.key, got.headers, got.payload, got.version) == (
        "ключ-東京",
        H,
        b"new",
        moved.version,
    )


async def test_a_dead_keyed_message_keeps_its_key_and_headers_through_a_redrive(
    storage: Storage,
) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("d", NOW, key="k", headers=H, expires_at=1))
    assert (await lease(storage)).dead_lettered == 1
    (dead,) = await storage.list_dead(T, "", 10)
    assert (dead.key, dead.headers) == ("k", H)
    assert await storage.redrive(T, None, NOW + 1) == 1
    (again,) = (await lease(storage, NOW + 1)).delivered
    assert (again.key, again.headers) == ("k", H)


# -- fair passes --------------------------------------------------------------


async def test_a_backlog_of_one_key_takes_no_more_than_its_share(storage: Storage) -> None:
    # given 300 messages of one key due first, and one message each of 5 other keys
    await given_topic(storage)
    await given_messages(
        storage, *(msg(f"c{i:03}", NOW - 100, bucket=i % 4, key="campaign") for i in range(300))
    )
    await given_messages(
        storage, *(msg(f"r{i}", NOW - i, bucket=i % 4, key=f"r{i}") for i in range(5))
    )
    # when a pass may take 10
    leases = await lease(storage, limit=10)
    # then each reminder goes out now, and the campaign has the rest
    assert keys_of(leases) == Counter({"campaign": 5, "r0": 1, "r1": 1, "r2": 1, "r3": 1, "r4": 1})
    # and the pass is in timestamp order, the campaign's oldest first
    assert [d.timestamp for d in leases.delivered] == sorted(d.timestamp for d in leases.delivered)


async def test_a_share_is_a_keys_across_buckets_not_a_buckets(storage: Storage) -> None:
    # given a key with a backlog in 4 buckets, and 3 keys with 10 due each in one bucket
    await given_topic(storage)
    await given_messages(
        storage, *(msg(f"c{i:03}", NOW - 50, bucket=i % 4, key="campaign") for i in range(400))
    )
    for k in range(3):
        await given_messages(
            storage, *(msg(f"k{k}-{i}", NOW - 10 + i, bucket=0, key=f"k{k}") for i in range(10))
        )
    # when a pass may take 20, then the 4 keys take 5 each
    leases = await lease(storage, limit=20)
    assert keys_of(leases) == Counter({"campaign": 5, "k0": 5, "k1": 5, "k2": 5})


async def test_what_a_key_leaves_goes_to_the_others(storage: Storage) -> None:
    # given keys with 1, 2 and 100 due messages
    await given_topic(storage)
    await given_messages(storage, msg("a0", NOW - 3, key="a"))
    await given_messages(storage, msg("b0", NOW - 3, key="b"), msg("b1", NOW - 2, key="b"))
    await given_messages(
        storage, *(msg(f"c{i:03}", NOW - 5, bucket=i % 4, key="c") for i in range(100))
    )
    # when a pass may take 30, then a and b take all they have and c the rest
    leases = await lease(storage, limit=30)
    assert keys_of(leases) == Counter({"a": 1, "b": 2, "c": 27})


async def test_keys_with_a_few_due_each_take_them_all_and_leave_the_rest(
    storage: Storage,
) -> None:
    # given keys with 7, 8 and 9 due in one bucket, one with 5 over four
    # buckets, and a backlog of another key over the four
    await given_topic(storage)
    for key, n, bucket in (("a", 7, 0), ("b", 8, 1), ("c", 9, 2)):
        await given_messages(
            storage, *(msg(f"{key}{i}", NOW - 20 + i, bucket=bucket, key=key) for i in range(n))
        )
    await given_messages(
        storage, *(msg(f"d{i}", NOW - 30 + i, bucket=i % 4, key="d") for i in range(5))
    )
    await given_messages(
        storage, *(msg(f"e{i:03}", NOW - 40, bucket=i % 4, key="e") for i in range(200))
    )
    # when a pass may take 50, then each small key takes all it has, the backlog the rest
    leases = await lease(storage, limit=50)
    assert keys_of(leases) == Counter({"a": 7, "b": 8, "c": 9, "d": 5, "e": 21})
    # and the next pass, with only the backlog due, takes from it alone
    assert keys_of(await lease(storage, limit=50)) == Counter({"e": 50})


async def test_within_a_key_messages_go_in_timestamp_order(storage: Storage) -> None:
    # given one key's messages in scrambled order of insertion, over buckets, and another key
    await given_topic(storage)
    times = [NOW - t for t in (7, 1, 9, 3, 5, 2, 8, 4, 6, 0)]
    await given_messages(
        storage, *(msg(f"m{i}", ts, bucket=i % 4, key="k") for i, ts in enumerate(times))
    )
    await given_messages(storage, *(msg(f"o{i}", NOW - 20, key="other") for i in range(10)))
    # when leasing a few at a time, then each pass takes k's earliest first
    seen: list[int] = []
    for _ in range(5):
        seen += [d.timestamp for d in (await lease(storage, limit=4)).delivered if d.key == "k"]
    assert seen == sorted(times)


async def test_messages_without_a_key_share_as_one_key(storage: Storage) -> None:
    # given 50 unkeyed messages due first and one message of key a due last
    await given_topic(storage)
    await given_messages(storage, *(msg(f"u{i:02}", NOW - 50 + i, bucket=i % 4) for i in range(50)))
    await given_messages(storage, msg("a", NOW, key="a"))
    # when a pass may take 10, then a goes out with 9 of the unkeyed, the oldest ones
    leases = await lease(storage, limit=10)
    assert keys_of(leases) == Counter({"": 9, "a": 1})
    assert sorted(d.id for d in leases.delivered if not d.key) == [f"u{i:02}" for i in range(9)]


async def test_a_topic_without_keys_leases_in_time_order(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, *(msg(f"m{i:02}", NOW - i, bucket=i % 4) for i in range(20)))
    assert ids(await lease(storage, limit=5)) == [f"m{i:02}" for i in (19, 18, 17, 16, 15)]


async def test_with_more_keys_than_the_limit_the_earliest_keys_go_first(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(
        storage, *(msg(f"k{i:02}", NOW - 100 + i, key=f"k{i:02}") for i in range(20))
    )
    assert ids(await lease(storage, limit=5)) == ["k00", "k01", "k02", "k03", "k04"]


async def test_the_earliest_keys_go_first_after_a_pass_that_took_part_of_a_key(
    storage: Storage,
) -> None:
    # given key a with two due messages in two buckets and key b with one, and
    # a pass that took the first of each
    await given_topic(storage)
    await given_messages(
        storage,
        msg("a0", NOW - 100, bucket=0, key="a"),
        msg("a1", NOW - 50, bucket=1, key="a"),
        msg("b0", NOW - 98, bucket=1, key="b"),
    )
    assert ids(await lease(storage, limit=2)) == ["a0", "b0"]
    # when keys c and d come due between a's two messages, and a pass may
    # take 2 of the 3 keys due
    await given_messages(
        storage, msg("c0", NOW - 80, bucket=2, key="c"), msg("d0", NOW - 70, bucket=3, key="d")
    )
    # then c and d go first: a's earliest due is now its last message, the latest
    assert ids(await lease(storage, limit=2)) == ["c0", "d0"]
    assert ids(await lease(storage, limit=2)) == ["a1"]


async def test_a_share_counts_only_what_is_due_by_the_bound(storage: Storage) -> None:
    # given a key mostly not due yet, a pass that looks ahead takes what is due by its bound
    await given_topic(storage)
    await given_messages(storage, *(msg(f"a{i}", NOW + i * 10, key="a") for i in range(10)))
    await given_messages(storage, *(msg(f"b{i}", NOW - 1, key="b") for i in range(10)))
    leases = await lease(storage, limit=10, horizon_ms=25)
    assert keys_of(leases) == Counter({"a": 3, "b": 7})
    assert all(d.timestamp <= NOW + 25 for d in leases.delivered)


async def test_an_expired_lease_is_due_again_in_its_key(storage: Storage) -> None:
    # given a keyed message leased by C1 whose lease runs out, and a backlog of another key
    await given_topic(storage)
    await given_messages(storage, msg("m", NOW, key="a"))
    assert ids(await lease(storage)) == ["m"]
    await given_messages(storage, *(msg(f"c{i:02}", NOW, bucket=i % 4, key="c") for i in range(50)))
    # when C2 leases after the lease ran out, then m is among the first taken, as a's share
    later = await lease(storage, NOW + LEASE + 1, limit=4, owner=C2)
    assert "m" in ids(later)
    assert keys_of(later) == Counter({"a": 1, "c": 3})


async def test_a_pass_over_some_buckets_shares_among_their_keys(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(
        storage, *(msg(f"c{i:02}", NOW - 9, bucket=i % 4, key="c") for i in range(40))
    )
    await given_messages(
        storage, msg("x", NOW, bucket=2, key="x"), msg("y", NOW, bucket=3, key="y")
    )
    leases = await lease(storage, limit=4, buckets=[0, 2])
    assert keys_of(leases) == Counter({"c": 3, "x": 1})
    assert all(d.id != "y" for d in leases.delivered)


# -- caps ---------------------------------------------------------------------


async def test_a_cap_bounds_a_key_and_leaves_the_rest_to_others(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(
        storage, *(msg(f"c{i:02}", NOW - 9, bucket=i % 4, key="c") for i in range(40))
    )
    await given_messages(
        storage, *(msg(f"d{i:02}", NOW - 5, bucket=i % 4, key="d") for i in range(40))
    )
    leases = await lease(storage, limit=20, caps={"c": 2})
    assert keys_of(leases) == Counter({"c": 2, "d": 18})
    # a cap of 0 takes none of the key; a key the caps do not name is not bounded
    none = await lease(storage, limit=20, caps={"c": 0, "zzz": 1})
    assert keys_of(none) == Counter({"d": 20})


async def test_a_cap_on_the_only_key_leaves_the_pass_short(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, *(msg(f"c{i:02}", NOW - 9, key="c") for i in range(40)))
    assert len((await lease(storage, limit=20, caps={"c": 3})).delivered) == 3
    assert len((await lease(storage, limit=20, caps={"c": 0})).delivered) == 0
    assert len((await lease(storage, limit=20)).delivered) == 20


# -- a priority topic ---------------------------------------------------------


async def test_a_priority_topic_keeps_keys_and_takes_by_rank(storage: Storage) -> None:
    settings = TopicSettings(buckets=2, lease_ms=LEASE, kind=KIND_PRIORITY, priorities=3)
    await storage.create_topic(Topic("p", settings, created_at_ms=1))
    await given_messages(
        storage,
        msg("low", NOW - 9, key="a")._replace(priority=2),
        msg("high", NOW - 1, key="b", headers=H)._replace(priority=0),
        topic="p",
    )
    await storage.promote("p", None, NOW, 10)
    leases = await lease(storage, topic="p", limit=1)
    assert [(d.id, d.key, d.headers) for d in leases.delivered] == [("high", "b", H)]


# -- busiest keys ---------------------------------------------------------------


async def test_the_busiest_keys_by_due_messages_with_their_held(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(
        storage, *(msg(f"c{i:02}", NOW - 9, bucket=i % 4, key="c") for i in range(30))
    )
    await given_messages(storage, *(msg(f"b{i}", NOW - 1, key="b") for i in range(5)))
    await given_messages(storage, *(msg(f"a{i}", NOW - 1, key="a") for i in range(5)))
    await given_messages(storage, msg("w", NOW + 10_000, key="waiting-only"), msg("u", NOW - 1))
    # a pass of 6 among c, b and the unkeyed: 2 each, then the 1 "" leaves to c (earliest)
    await lease(storage, limit=6, caps={"a": 0})
    loads = await storage.keys(T, NOW, 10)
    assert [(k.key, k.due, k.held) for k in loads] == [("c", 27, 3), ("a", 5, 0), ("b", 3, 2)]
    assert [k.oldest for k in loads] == [NOW - 9, NOW - 1, NOW - 1]
    assert [k.key for k in await storage.keys(T, NOW, 1)] == ["c"]


async def test_each_owner_sees_its_own_share(storage: Storage) -> None:
    # two leasers of disjoint buckets each share their own pass among their keys
    await given_topic(storage)
    await given_messages(
        storage, *(msg(f"c{i:02}", NOW - 9, bucket=i % 2, key="c") for i in range(40))
    )
    await given_messages(
        storage, msg("x0", NOW, bucket=0, key="x"), msg("x1", NOW, bucket=1, key="x")
    )
    one = await lease(storage, limit=2, buckets=[0], owner=C1)
    two = await lease(storage, limit=2, buckets=[1], owner=C2)
    assert keys_of(one) == keys_of(two) == Counter({"c": 1, "x": 1})
