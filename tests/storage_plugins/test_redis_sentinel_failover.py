"""``redis+sentinel://`` through the master's death: with ``wait_replicas=1`` a master
killed with ``kill -9`` while a producer and two consumers run is replaced by the
replica the sentinels promote, and the same storage instances keep working
without a restart (their calls refused until the killed server is back as the
new master's replica, as WAIT 1 wants one). No acknowledged produce or ack is
lost, nothing is leased early, and no message is held by two consumers at once
unless the first one's lease was lost with the master (leases do not wait for
replicas: that consumer's ack is refused, and the message is delivered again).
The session's group is healthy again for later tests."""

from __future__ import annotations

import asyncio
import time

from tests.redis_sentinel import RedisSentinel
from tests.servers import POLL_S
from tests.storage_plugins.cluster_load import Ledger, through_a_kill

TOPIC = "failover"
KILL_AFTER = 600  # acknowledged messages before the kill


async def kill_the_master_mid_run(group: RedisSentinel, ledger: Ledger) -> int:
    await ledger.until_produced(KILL_AFTER)
    victim = group.master()
    victim.kill()  # SIGKILL
    # The sentinels promote a replica; only once every one of them names it may
    # the killed server (no persistence: empty) come back, as its replica.
    while not group.promoted_everywhere(victim):
        assert time.monotonic() < ledger.deadline, "the sentinels promoted no replica"
        await asyncio.sleep(POLL_S)  # polling the sentinels under the run's deadline
    await asyncio.to_thread(group.rejoin, victim)
    await asyncio.to_thread(group.wait_healthy)
    return victim.port


async def test_a_killed_master_loses_no_acknowledged_produce_or_ack(
    redis_sentinel: RedisSentinel,
) -> None:
    # Given two storages (two brokers) on the sentinels' master, each call
    # waiting for its replica
    redis_sentinel.flush()
    url = f"{redis_sentinel.url}?wait_replicas=1&wait_timeout_ms=1000"
    try:
        # When a producer and two consumers run and the master is killed mid-run,
        # then nothing acknowledged is lost, early or held twice (through_a_kill)
        killed, ledger = await through_a_kill(
            url, TOPIC, lambda ledger: kill_the_master_mid_run(redis_sentinel, ledger)
        )
        # And a replica took over from the killed master
        assert redis_sentinel.master().port != killed
        print(f"sentinel failover: longest call {ledger.longest_call_s * 1000:.0f} ms")
    finally:
        await asyncio.to_thread(redis_sentinel.wait_healthy)
