"""What the hot paths of redis:// cost the server in commands, as the server
counts them (INFO commandstats, a script's own calls included): a few a
timeline a call touches, the rest a call, none a message."""

from __future__ import annotations

from dejaq.core.model import NewMessage
from dejaq.storage_plugins.base import LeaseRequest
from tests.redis_server import RedisServer
from tests.storage_plugins.redis_support import LEASE, NOW, T, given_topic, opened

BUCKETS = 64
PER_CALL = 16  # a call's own: its topic, alive, the heads index, the batch's writes
# Not the hot paths' commands: the scripts themselves and what reads or resets the count.
ASIDE = {"evalsha", "eval", "info", "config|resetstat"}


def reset(server: RedisServer) -> None:
    with server.client() as client:
        client.config_resetstat()


def commands(server: RedisServer) -> int:
    """The commands the server ran since ``reset``."""
    with server.client() as client:
        stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k.removeprefix("cmdstat_") not in ASIDE)


def one_a_bucket(ts: int) -> list[NewMessage]:
    return [NewMessage(f"m{b}", ts, b"x", b) for b in range(BUCKETS)]


async def test_an_insert_runs_one_command_a_timeline(server: RedisServer) -> None:
    # given a topic of 64 buckets
    async with opened(server.url) as storage:
        await given_topic(storage, buckets=BUCKETS)
        reset(server)
        # when a message is inserted into each bucket in one call
        await storage.insert(T, one_a_bucket(NOW))
        # then the server ran a ZADD a timeline and a few commands for the call
        ran = commands(server)
        assert BUCKETS <= ran <= BUCKETS + PER_CALL


async def test_a_lease_pass_runs_three_commands_a_timeline(server: RedisServer) -> None:
    # given one due message in each of 64 buckets
    async with opened(server.url) as storage:
        await given_topic(storage, buckets=BUCKETS)
        await storage.insert(T, one_a_bucket(NOW - 5))
        reset(server)
        # when one pass takes them all
        leases = await storage.lease(LeaseRequest.of(T, None, NOW, 100, LEASE, "c1", 0))
        assert sorted(d.id for d in leases.delivered) == sorted(f"m{b}" for b in range(BUCKETS))
        # then it read each timeline, moved its member to the lease expiry and
        # read its new head: three commands a timeline, its records in one call
        ran = commands(server)
        assert 3 * BUCKETS <= ran <= 3 * BUCKETS + PER_CALL
