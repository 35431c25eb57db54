"""What only the redis:// backend promises about keys: a pass over several
slots shares among the keys across them, also after passes that took each
slot's share at once; an unkeyed topic keeps its one script a slot."""

from __future__ import annotations

from collections import Counter

from dejaq.core.model import NewMessage
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import fair
from tests.redis_server import RedisServer
from tests.storage_plugins.redis_support import LEASE, NOW, T, given_topic, msg, opened


def scripts_run(server: RedisServer) -> int:
    with server.client() as client:
        stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k.startswith("cmdstat_evalsha"))


def keyed(id: str, ts: int, key: str) -> NewMessage:
    return msg(id, ts, 64)._replace(key=key)


async def test_keys_due_after_a_drained_pass_are_shared_across_the_slots(
    server: RedisServer,
) -> None:
    # given a topic over 8 slots whose last pass took everything due (so the
    # next takes each slot's share in one script a slot)
    async with opened(f"{server.url}?topic_slots=8") as storage:
        await given_topic(storage, buckets=64)
        await storage.insert(T, [msg(f"a{i}", NOW - 5, 64) for i in range(20)])
        first = await storage.lease(LeaseRequest.of(T, None, NOW, 100, LEASE, "c1"))
        assert len(first.delivered) == 20
        # when one key's backlog and five other keys' messages fall due
        await storage.insert(T, [keyed(f"c{i:03}", NOW - 100, "campaign") for i in range(300)])
        await storage.insert(T, [keyed(f"r{i}", NOW - i, f"r{i}") for i in range(5)])
        leases = await storage.lease(LeaseRequest.of(T, None, NOW, 10, LEASE, "c1"))
        # then the pass shares among the keys over every slot, in time order
        got = Counter(d.key for d in leases.delivered)
        assert got == Counter({"campaign": 5, "r0": 1, "r1": 1, "r2": 1, "r3": 1, "r4": 1})
        stamps = [d.timestamp for d in leases.delivered]
        assert stamps == sorted(stamps)


async def test_an_unkeyed_topic_after_keys_are_gone_is_one_script_a_slot_again(
    server: RedisServer,
) -> None:
    # given an 8-slot topic that had keys, all leased and acked
    async with opened(f"{server.url}?topic_slots=8") as storage:
        await given_topic(storage, buckets=64)
        await storage.insert(T, [keyed(f"k{i}", NOW - 5, f"k{i % 3}") for i in range(30)])
        taken = await storage.lease(LeaseRequest.of(T, None, NOW, 100, LEASE, "c1"))
        assert len(taken.delivered) == 30
        await storage.ack(T, [(d.id, d.version) for d in taken.delivered], "c1", NOW)
        # when passes find only unkeyed messages due, each taking all there is
        for round in range(3):
            await storage.insert(T, [msg(f"u{round}-{i}", NOW - 1, 64) for i in range(20)])
            with server.client() as client:
                client.config_resetstat()
            leases = await storage.lease(LeaseRequest.of(T, None, NOW, 100, LEASE, "c1"))
            assert len(leases.delivered) == 20
        # then the last one ran one lease script a slot, as a topic that never had keys
        assert scripts_run(server) == 8


# -- the shares a pass over several slots plans ---------------------------------


def test_shares_are_max_min_fair_and_what_a_key_leaves_goes_to_the_others() -> None:
    # given keys with 1, 2 and 100 due (due count, earliest)
    due = {"a": (1, 7), "b": (2, 8), "c": (100, 5)}
    # then a limit of 30 gives a and b all they have and c the rest
    assert fair.shares(due, 30) == {"a": 1, "b": 2, "c": 27}


def test_with_fewer_left_than_keys_the_earliest_keys_take_one_each() -> None:
    due = {f"k{i}": (5, 100 - i) for i in range(6)}
    assert fair.shares(due, 3) == {"k5": 1, "k4": 1, "k3": 1}


def test_caps_bound_a_key_and_a_cap_of_0_leaves_it_out() -> None:
    due = {"c": (40, 1), "d": (40, 2), "e": (40, 3)}
    assert fair.shares(due, 20, {"c": 2, "e": 0}) == {"c": 2, "d": 18}
