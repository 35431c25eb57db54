"""The memory backend keeps its counts as messages change; a random walk of
operations checks them against a full scan after every step."""

from __future__ import annotations

import random

from dejaq.core.errors import DejaqError
from dejaq.core.model import Counts, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.memory import MemoryStorage

T = "walk"
BUCKETS = 4


def scanned(storage: MemoryStorage, now: int) -> Counts:
    """Counts the slow way: every record looked at."""
    waiting = due = leased = dead = 0
    for rec in storage._timelines[T].records.values():
        if rec.dead:
            dead += 1
        elif rec.timestamp <= now:
            due += 1
        elif rec.owner is not None:
            leased += 1
        else:
            waiting += 1
    return Counts(waiting, due, leased, dead)


async def test_counts_match_a_full_scan_through_a_random_walk() -> None:
    rng = random.Random(7)
    storage = MemoryStorage()
    await storage.create_topic(Topic(T, TopicSettings(buckets=BUCKETS)))
    now = 1_000
    ids = [f"m{i}" for i in range(40)]
    for _ in range(1_500):
        now += rng.choice((0, 1, 5, 50))
        mid = rng.choice(ids)
        owner = rng.choice(("a", "b"))
        op = rng.randrange(11)
        try:
            if op == 0:
                md = rng.choice((0, 0, 1, 2))
                ts = now + rng.randint(-20, 200)
                await storage.insert(T, [NewMessage(mid, ts, b"p", hash(mid) % BUCKETS, md)])
            elif op == 1:
                await storage.lease(
                    LeaseRequest.of(T, None, now, rng.randint(1, 5), rng.randint(10, 100), owner, 3)
                )
            elif op in (2, 3, 4):
                msg = await storage.get(T, mid)
                item = [(mid, msg.version)]
                if op == 2:
                    await storage.ack(T, item, owner, now)
                elif op == 3:
                    await storage.nack(T, item, owner, now + rng.randint(0, 50), 3)
                else:
                    await storage.extend(T, item, owner, now + rng.randint(1, 80))
            elif op in (5, 6):
                msg = await storage.get(T, mid)
                if op == 5:
                    await storage.move(T, mid, msg.version, now + rng.randint(-10, 100), now)
                else:
                    await storage.cancel(T, mid, msg.version, now)
            elif op == 7:
                await storage.release(T, owner, now)
            elif op == 8:
                await storage.redrive(T, rng.choice((None, [mid])), now + rng.randint(0, 30))
            elif op == 9:
                await storage.purge_dead(T, now - rng.randint(0, 100))
            else:
                await storage.lease(
                    LeaseRequest.of(T, {rng.randrange(BUCKETS)}, now, 3, 30, owner, 0)
                )
        except DejaqError:
            pass  # refused mutations change nothing; the counts must agree still
        probe = now + rng.choice((0, 10, 100))
        assert await storage.counts(T, probe) == scanned(storage, probe)
