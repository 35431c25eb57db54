"""The stored format's version on ``redis://`` and ``redis+cluster://``: a new
store is marked with this layout's version, a broker refuses a store of a
version it cannot read, before touching anything, and ``dejaq storage
migrate`` upgrades a version 1, 2, 3 or 4 store in place with nothing lost."""

from __future__ import annotations

import asyncio
import struct

import pytest

from dejaq.broker.cron.entries import companion
from dejaq.core.errors import StorageError
from dejaq.core.model import Counts, InsertStatus, Message, NewMessage, Topic, TopicSettings
from dejaq.driver.cli.main import main
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis import record as redis_record
from dejaq.storage_plugins.redis.keys import Slot
from tests.redis_cluster import RedisCluster
from tests.redis_server import RedisServer
from tests.storage_plugins.redis_support import msg, opened

Store = RedisServer | RedisCluster
CRON = companion("orders")


@pytest.fixture(params=["redis", "redis-cluster"])
def store(request: pytest.FixtureRequest) -> tuple[str, Store]:
    """An empty store's URL, and its server (or cluster)."""
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        return server.url, server
    cluster: RedisCluster = request.getfixturevalue("redis_cluster")
    cluster.flush()
    return cluster.url, cluster


async def migrate(url: str) -> int:
    """``dejaq storage migrate URL`` (the CLI runs its own event loop: in a thread)."""
    return await asyncio.to_thread(main, ["storage", "migrate", url])


def _node(store: Store, key: str) -> RedisServer | object:
    return store if isinstance(store, RedisServer) else store.master_of(key)


def _format(store: Store) -> bytes | None:
    with _node(store, redis_keys.FORMAT).client() as client:  # type: ignore[attr-defined]
        value: bytes | None = client.get(redis_keys.FORMAT)
        return value


def _set_format(store: Store, version: str) -> None:
    with _node(store, redis_keys.FORMAT).client() as client:  # type: ignore[attr-defined]
        client.set(redis_keys.FORMAT, version)


# What a migrate cut short while moving a slot to its new tag left: its
# messages rewritten, its timelines and these moved, its records copied but
# not yet deleted, the rest still under the old tag (``migrate``'s order).
_MOVED = (redis_keys.OWNED, redis_keys.DEAD, redis_keys.DEAD_IDS)
_MOVED += (redis_keys.STRAY_HOMES, redis_keys.ENTERED)


def _to_sorted_tombs(store: Store, topic: str, slots: int) -> int:
    """Rewrite a topic's tombstones as versions 1 to 3 kept them: a sorted set
    ``tombs``, id scored by the time of deletion, with no field of ``records``
    and no ``graves``; the count of tombstones."""
    count = 0
    for index in range(slots):
        s = Slot(topic, index, slots)
        with _node(store, s.records).client() as client:  # type: ignore[attr-defined]
            for raw_id, value in client.hgetall(s.records).items():
                if len(value) == redis_record.TOMB_SIZE:
                    (at,) = struct.unpack(redis_record.TOMB, value)
                    client.zadd(s.tombs, {raw_id: at})
                    client.hdel(s.records, raw_id)
                    count += 1
            client.delete(s.graves)
    return count


def _to_owned(store: Store, topic: str, slots: int) -> int:
    """Rewrite a topic's leases as formats 1 to 4 kept them: a sorted set
    ``owned``, each leased id scored by its lease expiry, with no grants; the
    count of leased ids."""
    count = 0
    for index in range(slots):
        s = Slot(topic, index, slots)
        with _node(store, s.records).client() as client:  # type: ignore[attr-defined]
            for name in client.zrange(s.grants, 0, -1):
                client.delete(s.grant(name.decode()))
            client.delete(s.grants, s.granted)
            for raw_id, value in client.hgetall(s.records).items():
                if len(value) == redis_record.TOMB_SIZE:
                    continue
                r = redis_record.decode(value)
                if r.owner is not None and not r.dead:
                    client.zadd(s.owned, {raw_id: r.ts})
                    count += 1
    return count


def _to_version_1(store: Store, topic: str, slots: int, cut_short: int | None = None) -> int:
    """Rewrite a topic's slots in the version 1 layout: each slot's keys under
    its plain tag ``<topic>:<index>``, and a hash ``m:<id>`` and a string
    ``p:<id>`` a message (the sorted sets are the same in both, tombstones
    included: ``_to_sorted_tombs``), the raw keys a version 1 broker wrote; slot
    ``cut_short`` as a migrate cut short while moving it left it. The count of
    messages in the version 1 layout."""
    _to_sorted_tombs(store, topic, slots)
    _to_owned(store, topic, slots)
    count = 0
    for index in range(slots):
        s, old = Slot(topic, index, slots), Slot.format1(topic, index, slots)
        with _node(store, s.records).client() as client:  # type: ignore[attr-defined]
            records, payloads = {}, {}
            if index != cut_short:
                records = client.hgetall(s.records)
                payloads = client.hgetall(s.payloads)
                client.delete(s.records, s.payloads)
            rest = [k.decode() for k in client.keys(_glob(s.prefix) + "*")]
            if index == cut_short:
                moved = [s.prefix + k for k in _MOVED]
                rest = [k for k in rest if k not in moved and k[len(s.prefix) :][:3] != "tl:"]
            dumps = {k.removeprefix(s.prefix): client.dump(k) for k in rest}
            gone = [k for k in rest if k != s.records]
            if gone:
                client.delete(*gone)
        with _node(store, old.records).client() as client:  # type: ignore[attr-defined]
            for suffix, dumped in dumps.items():
                client.restore(old.prefix + suffix, 0, dumped, replace=True)
            for raw_id, packed in records.items():
                id, r = raw_id.decode(), redis_record.decode(packed)
                fields = {"ts": r.ts, "v": r.version, "n": r.deliveries, "b": r.bucket}
                fields |= {"md": r.max_deliveries, "ex": r.expires_at, "dead": int(r.dead)}
                if r.owner is not None:
                    fields["o"] = r.owner
                if r.priority:
                    fields["p"] = r.priority
                client.hset(old.v1_record(id), mapping=fields)  # type: ignore[arg-type]
                payload = r.payload if r.payload is not None else payloads[raw_id]
                client.set(old.v1_payload(id), payload)
                count += 1
    return count


def _glob(text: str) -> str:
    """``text`` as a literal in a KEYS pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


async def test_a_new_store_is_marked_with_this_layout_s_version(
    store: tuple[str, Store],
) -> None:
    url, server = store
    storage = storage_from_url(url)
    await storage.open()
    await storage.close()
    assert _format(server) == str(redis_keys.FORMAT_VERSION).encode()


async def test_a_store_of_a_newer_version_is_refused_at_open_and_by_migrate(
    store: tuple[str, Store],
) -> None:
    # Given a store written by a dejaq of a newer stored format
    url, server = store
    newer, mine = redis_keys.FORMAT_VERSION + 1, redis_keys.FORMAT_VERSION
    _set_format(server, str(newer))
    # When a broker opens it, then it refuses, naming both versions
    storage = storage_from_url(url)
    with pytest.raises(StorageError, match=rf"format version '{newer}'.*reads version {mine}"):
        await storage.open()
    # And a migrate refuses too, and the store was left as it was
    assert await migrate(url) == 1
    assert _format(server) == str(newer).encode()


async def test_a_version_1_store_is_refused_with_the_upgrade_command(
    store: tuple[str, Store],
) -> None:
    url, server = store
    _set_format(server, "1")
    with pytest.raises(StorageError, match=r"version '1'.*dejaq storage migrate URL"):
        await storage_from_url(url).open()
    assert _format(server) == b"1"


async def _state(url: str, ids: dict[str, list[str]], now: int) -> dict[str, object]:
    """Everything a broker reads of the given messages and their topics."""
    async with opened(url) as storage:
        out: dict[str, object] = {}
        for topic, names in ids.items():
            got: list[Message] = [await storage.get(topic, id) for id in names]
            out[topic] = (
                got,
                await storage.counts(topic, now),
                await storage.list_dead(topic, "", 100),
            )
        return out


@pytest.mark.parametrize("cut_short", [None, 1], ids=["whole", "cut-short"])
async def test_migrate_upgrades_a_version_1_store_in_place_with_nothing_lost(
    store: tuple[str, Store], capsys: pytest.CaptureFixture[str], cut_short: int | None
) -> None:
    url, server = store
    now = 1_000_000
    url4 = url + "?topic_slots=4"
    # Given a store with messages in every state: waiting, leased, dead, a
    # tombstone, a priority, a stray, over 4 slots, and a cron entries' timeline
    async with opened(url4) as storage:
        await storage.create_topic(Topic("t", TopicSettings(buckets=8, lease_ms=30_000)))
        await storage.create_topic(Topic(CRON, TopicSettings(buckets=8)))
        ids = [f"m{i}" for i in range(40)]
        await storage.insert("t", [msg(id, now + 60_000) for id in ids[:10]])  # waiting
        await storage.insert("t", [msg(id, now - 10) for id in ids[10:]])  # due
        await storage.insert("t", [NewMessage("stray", now + 5, b"s", 7)])
        await storage.insert("t", [msg("large", now + 5)._replace(payload=b"L" * 5000)])
        await storage.insert("t", [msg("dies", now - 100, expires_at=1)])
        await storage.insert(CRON, [msg("entry-1", now + 3_600_000, priority=0)])
        leases = await storage.lease(LeaseRequest("t", None, now, 20, 30_000, "c1"))
        held = {m.id: m.version for m in leases.delivered}
        assert (len(held), leases.dead_lettered) == (20, 1)
        acked = sorted(held)[:5]
        await storage.ack("t", [(id, held[id]) for id in acked], "c1", now)
    names = {"t": [*ids, "stray", "large", "dies"], CRON: ["entry-1"]}
    names["t"] = [id for id in names["t"] if id not in acked]
    before = await _state(url4, names, now)
    # And the store rewritten in the version 1 layout, as a version 1 broker
    # left it (or with a slot half moved by a migrate cut short)
    moved = _to_version_1(store[1], "t", 4, cut_short) + _to_version_1(store[1], CRON, 1)
    _set_format(server, "1")
    # When `dejaq storage migrate` runs on it
    assert await migrate(url) == 0
    version = redis_keys.FORMAT_VERSION
    assert f"from stored format version 1 to {version} ({moved} messages rewritten)" in (
        capsys.readouterr().out
    )
    # Then the store is at this version, and a broker reads every message as before
    assert _format(server) == str(version).encode()
    assert await _state(url4, names, now) == before
    async with opened(url4) as storage:
        # And leases, tombstones and the due messages work on
        assert await storage.insert("t", [msg(acked[0], now)]) == [1]  # still a duplicate
        outcomes = await storage.ack("t", [(id, held[id]) for id in sorted(held)[5:]], "c1", now)
        assert all(type(o).__name__ == "Settled" for o in outcomes)
        rest = await storage.lease(LeaseRequest("t", None, now, 100, 30_000, "c2"))
        assert sorted(m.id for m in rest.delivered) == sorted(
            id for id in ids[10:] if id not in held
        )
        assert await storage.redrive("t", None, now) == 1
    # And a second run finds nothing to do
    assert await migrate(url) == 0
    assert f"at stored format version {version} already" in capsys.readouterr().out


def _to_version_2(store: Store, topic: str, slots: int) -> int:
    """Rewrite a topic's records as version 2 packed them (``<ddddddBdH``, the
    owner, then the payload inline unless flag 2 keeps it apart: no key, no
    headers; tombstones and leases in sorted sets); the count of records."""
    _to_sorted_tombs(store, topic, slots)
    _to_owned(store, topic, slots)
    count = 0
    for index in range(slots):
        s = Slot(topic, index, slots)
        with _node(store, s.records).client() as client:  # type: ignore[attr-defined]
            for raw_id, packed in client.hgetall(s.records).items():
                r = redis_record.decode(packed)
                assert not r.key and not r.headed  # version 2 had none
                owner = (r.owner or "").encode()
                flags = (1 if r.dead else 0) | (2 if r.payload is None else 0)
                old = struct.pack(
                    "<ddddddBdH", r.ts, r.version, r.deliveries, r.bucket, r.max_deliveries,
                    r.expires_at, flags, r.priority, len(owner),
                )  # fmt: skip
                client.hset(s.records, raw_id, old + owner + (r.payload or b""))
                count += 1
    return count


async def test_migrate_upgrades_a_version_2_store_and_keys_work_on_it(
    store: tuple[str, Store], capsys: pytest.CaptureFixture[str]
) -> None:
    url, server = store
    now = 1_000_000
    # Given a store a version 2 broker wrote: messages waiting, due, leased,
    # dead, a large payload, no key anywhere
    async with opened(url) as storage:
        await storage.create_topic(Topic("t", TopicSettings(buckets=8, lease_ms=30_000)))
        ids = [f"m{i:02}" for i in range(30)]
        await storage.insert("t", [msg(id, now + 60_000) for id in ids[:10]])
        await storage.insert("t", [msg(id, now - 10) for id in ids[10:]])
        await storage.insert("t", [msg("large", now + 5)._replace(payload=b"L" * 5000)])
        await storage.insert("t", [msg("dies", now - 100, expires_at=1)])
        leases = await storage.lease(LeaseRequest("t", None, now, 5, 30_000, "c1"))
        assert (len(leases.delivered), leases.dead_lettered) == (5, 1)
    names = {"t": [*ids, "large", "dies"]}
    before = await _state(url, names, now)
    slots = 6 if isinstance(server, RedisCluster) else 1  # the URL's default topic_slots
    assert _to_version_2(server, "t", slots) == 32
    _set_format(server, "2")
    # When a broker opens it, then it asks for the upgrade
    with pytest.raises(StorageError, match=r"version '2'.*dejaq storage migrate URL"):
        await storage_from_url(url).open()
    # When `dejaq storage migrate` runs on it
    assert await migrate(url) == 0
    version = redis_keys.FORMAT_VERSION
    assert f"from stored format version 2 to {version}" in capsys.readouterr().out
    # Then every message reads as before
    assert _format(server) == str(version).encode()
    assert await _state(url, names, now) == before
    async with opened(url) as storage:
        # And keyed messages go in beside them, and a pass shares among the keys
        await storage.insert("t", [msg(f"k{i}", now - 1)._replace(key="tenant") for i in range(3)])
        rest = await storage.lease(LeaseRequest("t", None, now, 4, 30_000, "c2"))
        assert sorted(d.key for d in rest.delivered) == ["", "", "tenant", "tenant"]
        assert (await storage.get("t", "k0")).key == "tenant"


async def test_migrate_moves_a_version_3_store_s_tombstones_and_they_still_hold(
    store: tuple[str, Store], capsys: pytest.CaptureFixture[str]
) -> None:
    url, server = store
    now = 1_000_000
    # Given a store a version 3 broker wrote: 30 messages acked a millisecond
    # apart, their tombstones in a sorted set, and 5 messages waiting
    async with opened(url) as storage:
        await storage.create_topic(Topic("t", TopicSettings(buckets=8, lease_ms=30_000)))
        ids = [f"m{i:02}" for i in range(35)]
        await storage.insert("t", [msg(id, now - 10) for id in ids[:30]])
        await storage.insert("t", [msg(id, now + 60_000) for id in ids[30:]])
        leases = await storage.lease(LeaseRequest("t", None, now, 30, 30_000, "c1"))
        acked = sorted(leases.delivered, key=lambda m: m.id)
        for k, m in enumerate(acked):
            await storage.ack("t", [(m.id, m.version)], "c1", now + k)
    slots = 6 if isinstance(server, RedisCluster) else 1  # the URL's default topic_slots
    assert _to_sorted_tombs(server, "t", slots) == 30
    assert _to_owned(server, "t", slots) == 0
    _set_format(server, "3")
    # When `dejaq storage migrate` runs on it
    assert await migrate(url) == 0
    version = redis_keys.FORMAT_VERSION
    assert f"from stored format version 3 to {version}" in capsys.readouterr().out
    # Then no sorted set of tombstones is left
    for index in range(slots):
        s = Slot("t", index, slots)
        with _node(server, s.tombs).client() as client:  # type: ignore[attr-defined]
            assert not client.exists(s.tombs)
    async with opened(url) as storage:
        # And every acked id is still taken, the waiting ones still wait
        taken = await storage.insert("t", [msg(m.id, now) for m in acked])
        assert taken == [InsertStatus.DUPLICATE] * 30
        assert (await storage.counts("t", now)).waiting == 5
        # And a sweep forgets the tombstones older than its bound, and those alone
        assert await storage.purge_tombstones("t", now + 10, 100) == 10
        again = await storage.insert("t", [msg(m.id, now) for m in acked])
        assert again == [InsertStatus.ACCEPTED] * 10 + [InsertStatus.DUPLICATE] * 20


async def test_migrate_moves_a_version_4_store_s_leases_to_grants_and_they_still_hold(
    store: tuple[str, Store], capsys: pytest.CaptureFixture[str]
) -> None:
    url, server = store
    now = 1_000_000
    # Given a store a version 4 broker wrote: 10 messages leased by c1, 5 by c2
    # (2 of them extended), 5 waiting, each leased id on the sorted set `owned`
    async with opened(url) as storage:
        await storage.create_topic(Topic("t", TopicSettings(buckets=8, lease_ms=30_000)))
        ids = [f"m{i:02}" for i in range(20)]
        await storage.insert("t", [msg(id, now - 10) for id in ids[:15]])
        await storage.insert("t", [msg(id, now + 60_000) for id in ids[15:]])
        c1 = (await storage.lease(LeaseRequest("t", None, now, 10, 30_000, "c1"))).delivered
        c2 = (await storage.lease(LeaseRequest("t", None, now, 10, 20_000, "c2"))).delivered
        await storage.extend("t", [(m.id, m.version) for m in c2[:2]], "c2", now + 40_000)
    names = {"t": ids}
    before = await _state(url, names, now)
    slots = 6 if isinstance(server, RedisCluster) else 1  # the URL's default topic_slots
    assert _to_owned(server, "t", slots) == 15
    _set_format(server, "4")
    # When `dejaq storage migrate` runs on it
    assert await migrate(url) == 0
    version = redis_keys.FORMAT_VERSION
    assert f"from stored format version 4 to {version}" in capsys.readouterr().out
    # Then every message and count reads as before, and no `owned` is left
    assert await _state(url, names, now) == before
    for index in range(slots):
        s = Slot("t", index, slots)
        with _node(server, s.owned).client() as client:  # type: ignore[attr-defined]
            assert not client.exists(s.owned)
    async with opened(url) as storage:
        assert (await storage.counts("t", now + 25_000)).leased == 12  # c2's 3 ran out
        # And the holders settle their leases, a release finds c2's
        outcomes = await storage.ack("t", [(m.id, m.version) for m in c1], "c1", now)
        assert all(type(o).__name__ == "Settled" for o in outcomes)
        assert await storage.release("t", "c2", now) == 5
        assert await storage.counts("t", now) == Counts(due=5, waiting=5)
