"""A broker process started on ``redis+cluster://?wait_replicas=1`` before the
cluster can take its first write (a fresh cluster's replicas still syncing):
it waits for the storage, saying so in its log, and serves once it can."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from dejaq.driver import Admin, Client, Consumer, Producer
from dejaq.storage_plugins.redis import keys as redis_keys
from tests.e2e.broker_process import BrokerProcess
from tests.redis_cluster import RedisCluster

pytestmark = pytest.mark.timeout(120)
WAITING = "storage not ready, retrying"
LOG_TIMEOUT_S = 30.0


async def test_a_broker_started_before_the_replicas_sync_waits_then_serves(
    redis_cluster: RedisCluster, tmp_path: Path
) -> None:
    # Given a cluster whose master of the store's first write has no replica in sync
    redis_cluster.flush()
    master = redis_cluster.master_of(redis_keys.FORMAT)
    [replica_port] = master.replica_ports()
    replica = redis_cluster.node(replica_port)
    url = f"{redis_cluster.url}?wait_replicas=1&wait_timeout_ms=300"
    broker = BrokerProcess(url, tmp_path / "broker.log")
    replica.pause()
    try:
        # When a broker starts on it
        broker.launch()
        # Then it waits, saying why, instead of exiting
        deadline = time.monotonic() + LOG_TIMEOUT_S
        while WAITING not in broker.log_path.read_text():
            assert broker.alive, f"the broker exited; its log ends:\n{broker.log_tail()}"
            assert time.monotonic() < deadline, f"no {WAITING!r} line:\n{broker.log_tail()}"
            await asyncio.sleep(0.05)  # polling the broker's log
        assert broker.alive
    finally:
        replica.resume()
    try:
        # And once the replica is back it serves: a message goes through
        await asyncio.to_thread(broker.wait_listening)
        async with Client(broker.address) as client:
            await Admin(client).create_topic("ready")
            async with Producer(client, "ready") as producer:
                await producer.send(b"hello")
            async with Consumer(client, "ready") as consumer:
                async for delivery in consumer:
                    assert delivery.payload == b"hello"
                    await delivery.ack(confirm=True)
                    break
    finally:
        assert broker.stop() == 0
        await asyncio.to_thread(redis_cluster.wait_healthy)
