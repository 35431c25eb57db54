"""A broker on served storage (Redis, PostgreSQL): a broker ``kill -9`` loses no
acknowledged produce, and a storage server restart mid-run is survived — the
broker reports NOT_SERVING meanwhile, then serves again, and every message is
delivered at least once, none early."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dejaq.core.errors import DejaqError
from dejaq.driver.client import Client
from dejaq.driver.consumer import Delivery
from dejaq.driver.producer import Outgoing
from tests.postgres_server import PostgresServer, bin_dir, require_driver
from tests.redis_server import RedisServer
from tests.servers import require_binary

from .broker_process import StartBroker
from .support import ack_all, consuming, create_topic, now_ms, produce, wait_until

N = 300


async def test_broker_kill_9_on_served_storage_loses_nothing(
    start_broker: StartBroker, served_url: str
) -> None:
    # Given 300 messages whose produce was acknowledged, due 1.5 s from now
    first = start_broker(served_url)
    async with Client(first.address) as client:
        topic = await create_topic(client, "served")
        due = now_ms() + 1_500
        messages = [Outgoing(b"%d" % i, due + i, id=f"m{i:03d}") for i in range(N)]
        await produce(client, topic, messages)
    # When the broker is killed and another starts on the same storage
    assert first.kill() == -9
    second = start_broker(served_url)
    async with Client(second.address) as client, consuming(client, topic, credits=500) as inbox:
        got = await inbox.take(N, timeout_s=30)
        await ack_all(got)
    # Then every message arrives, once, and none early
    assert sorted(d.id for d in got) == [m.id for m in messages]
    assert all(d.received_at_ms >= d.timestamp_ms for d in got)


@dataclass
class Restartable:
    """A storage server of the test's own, to stop hard and start again."""

    url: str
    stop: Callable[[], None]
    start: Callable[[], None]


@pytest.fixture(params=["redis", "postgres"])
def restartable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Restartable]:
    if request.param == "redis":
        redis = RedisServer(require_binary("redis-server"), tmp_path, persistent=True)
        redis.start()
        try:
            yield Restartable(redis.url, redis.kill, redis.start)
        finally:
            redis.kill()
        return
    require_driver()
    pg = PostgresServer.create(bin_dir(), fsync="on")
    try:
        pg.start()
        url = pg.create_database("restart")
        yield Restartable(url, pg.stop, pg.start)
    finally:
        pg.destroy()


async def serving(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        resp = await stub.Check(health_pb2.HealthCheckRequest(service="dejaq.v1.Timeline"))
        return int(resp.status)


async def test_a_storage_server_restart_mid_run_is_survived(
    start_broker: StartBroker, restartable: Restartable
) -> None:
    # Given a broker on served storage with 300 messages due over 3 s, being consumed
    broker = start_broker(restartable.url)
    seen: dict[str, Delivery] = {}
    async with Client(broker.address) as client:
        topic = await create_topic(client, "restart")
        start = now_ms() + 300
        messages = [Outgoing(b"x", start + i * 10, id=f"r{i:03d}") for i in range(N)]
        await produce(client, topic, messages)
        async with consuming(client, topic, credits=50, lease_ms=2_000) as inbox:
            for d in await inbox.take(20, timeout_s=10):
                seen[d.id] = d
                await d.ack(confirm=True)
            # When the storage server goes down
            restartable.stop()
            down = health_pb2.HealthCheckResponse.NOT_SERVING

            async def reports_down() -> bool:
                return await serving(broker.address) == down

            await wait_until(reports_down, timeout_s=10, what="NOT_SERVING")
            # and comes back on the same port with its data
            restartable.start()
            up = health_pb2.HealthCheckResponse.SERVING

            async def reports_up() -> bool:
                return await serving(broker.address) == up

            await wait_until(reports_up, timeout_s=15, what="SERVING again")
            # Then delivery goes on until every message has come at least once
            deadline = time.monotonic() + 40
            while len(seen) < N and time.monotonic() < deadline:
                for d in await inbox.take(1, timeout_s=deadline - time.monotonic()):
                    seen.setdefault(d.id, d)
                    try:
                        await d.ack(confirm=True)
                    except DejaqError:
                        pass  # acked during the outage: it comes back after its lease
    assert sorted(seen) == [m.id for m in messages]
    assert all(d.received_at_ms >= d.timestamp_ms for d in seen.values())
    assert broker.alive
