"""redis:// keeps the leases by grant (``keys.GRANTS``): a lease pass makes one
grant, its ids in one list and its count in ``granted``, and every way a lease
ends or moves takes it off its grant's count, so a settled grant leaves no key
behind and ``leased`` counts exactly."""

from __future__ import annotations

from dejaq.core.model import OnDuplicate
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import keys as redis_keys
from tests.redis_server import RedisServer
from tests.storage_plugins.redis_support import LEASE, NOW, T, given_topic, msg, opened

SLOT = redis_keys.Slot(T, 0, 1)


def grants(server: RedisServer) -> dict[str, int]:
    """Each grant's name and count; and every grant has its list, and no other."""
    with server.client() as client:
        names = {n.decode() for n in client.zrange(SLOT.grants, 0, -1)}
        counts = {k.decode(): int(v) for k, v in client.hgetall(SLOT.granted).items()}
        lists = {k.decode() for k in client.keys(SLOT.grant("*"))}
    assert set(counts) == names
    assert lists == {SLOT.grant(n) for n in names}
    return counts


async def test_a_lease_pass_makes_one_grant_and_acks_take_its_count_down(
    server: RedisServer,
) -> None:
    # given 30 due messages
    async with opened(server.url) as storage:
        await given_topic(storage)
        await storage.insert(T, [msg(f"m{i}", NOW - 10) for i in range(30)])
        # when one pass leases them all
        leased = (await storage.lease(LeaseRequest.of(T, None, NOW, 100, LEASE, "c1"))).delivered
        # then they are one grant of 30, named by its expiry and owner
        assert grants(server) == {f"{NOW + LEASE}:c1": 30}
        assert (await storage.counts(T, NOW)).leased == 30
        # and acks take them off it, the last one deletes it
        await storage.ack(T, [(m.id, m.version) for m in leased[:10]], "c1", NOW)
        assert grants(server) == {f"{NOW + LEASE}:c1": 20}
        await storage.ack(T, [(m.id, m.version) for m in leased[10:]], "c1", NOW)
        assert grants(server) == {}


async def test_every_way_a_lease_ends_or_moves_keeps_the_grants_exact(
    server: RedisServer,
) -> None:
    # given 12 due messages leased by c1
    later = NOW + LEASE + 10
    async with opened(server.url) as storage:
        await given_topic(storage)
        await storage.insert(T, [msg(f"m{i:02}", NOW - 10) for i in range(12)])
        c1 = (await storage.lease(LeaseRequest.of(T, None, NOW, 12, LEASE, "c1"))).delivered
        v = {m.id: m.version for m in c1}
        # when c1 acks two, nacks one, extends two and hands one back
        await storage.ack(T, [("m00", v["m00"]), ("m01", v["m01"])], "c1", NOW)
        await storage.nack(T, [("m02", v["m02"])], "c1", NOW + 5, 0)
        await storage.extend(T, [("m03", v["m03"]), ("m04", v["m04"])], "c1", NOW + 5_000)
        await storage.hand_back(T, [("m05", v["m05"], NOW - 10)], "c1")
        assert grants(server) == {f"{NOW + LEASE}:c1": 6, f"{NOW + 5_000}:c1": 2}
        # and, its lease run out, c2 takes the two put back and one of c1's
        c2 = (await storage.lease(LeaseRequest.of(T, None, later, 3, LEASE, "c2"))).delivered
        assert {"m02", "m05"} < {m.id for m in c2}
        assert grants(server) == {
            f"{NOW + LEASE}:c1": 5, f"{NOW + 5_000}:c1": 2, f"{later + LEASE}:c2": 3,
        }  # fmt: skip
        # and of c1's lapsed ones, one is cancelled, one moved, one replaced
        lapsed = sorted(f"m{i:02}" for i in range(6, 12) if f"m{i:02}" not in {m.id for m in c2})
        await storage.cancel(T, lapsed[0], v[lapsed[0]], later)
        await storage.move(T, lapsed[1], v[lapsed[1]], later + 100, later)
        replaced = msg(lapsed[2], later + 200)
        await storage.insert(T, [replaced], OnDuplicate.REPLACE, later)
        # then each grant counts what it still leases, live or run out
        assert grants(server) == {
            f"{NOW + LEASE}:c1": 2, f"{NOW + 5_000}:c1": 2, f"{later + LEASE}:c2": 3,
        }  # fmt: skip
        assert (await storage.counts(T, later)).leased == 5
        # and releasing both owners ends them all, leaving no grant behind
        assert await storage.release(T, "c1", later) == 4
        assert await storage.release(T, "c2", later) == 3
        assert grants(server) == {}
        assert (await storage.counts(T, later)).leased == 0


async def test_a_lapsed_lease_dead_lettered_at_its_next_pass_leaves_its_grant(
    server: RedisServer,
) -> None:
    # given a message of at most 2 deliveries, leased twice, the second lease run out
    async with opened(server.url) as storage:
        await given_topic(storage)
        await storage.insert(T, [msg("m", NOW - 10, max_deliveries=2)])
        for at, owner in ((NOW, "c1"), (NOW + LEASE, "c2")):
            await storage.lease(LeaseRequest.of(T, None, at, 1, LEASE, owner))
        assert grants(server) == {f"{NOW + 2 * LEASE}:c2": 1}
        # when the next pass finds it out of deliveries
        leases = await storage.lease(LeaseRequest.of(T, None, NOW + 2 * LEASE, 1, LEASE, "c3"))
        # then it is dead lettered, and its grant is gone
        assert (leases.delivered, leases.dead_lettered) == ([], 1)
        assert grants(server) == {}


async def test_a_message_extended_out_of_a_grant_still_counts_held_for_its_key(
    server: RedisServer,
) -> None:
    # given three due messages of one key leased by c1 in one pass
    async with opened(server.url) as storage:
        await given_topic(storage)
        await storage.insert(T, [msg(f"m{i}", NOW - 10)._replace(key="tenant") for i in range(3)])
        c1 = (await storage.lease(LeaseRequest.of(T, None, NOW, 3, LEASE, "c1"))).delivered
        # when c1 extends one of them (its id stays listed in the first grant too)
        m = c1[0]
        await storage.extend(T, [(m.id, m.version)], "c1", NOW + 5_000)
        # then the key's busiest line still counts all three held
        [load] = await storage.keys(T, NOW, 10)
        assert (load.key, load.held) == ("tenant", 3)
