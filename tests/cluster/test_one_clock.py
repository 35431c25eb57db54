"""One clock decides: a broker whose clock runs 500 ms ahead (libfaketime)
delivers nothing early and never leases a message another broker's consumer
still holds — over Redis and PostgreSQL because the storage server's clock
decides, over SQLite because the skew guard stops that broker until its clock
is back, and its consumers move to the others meanwhile. Early and held are
judged by this test's own, true clock."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dejaq.core.errors import BrokerUnavailable
from dejaq.core.model import InsertStatus, TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing, Producer
from tests.cluster.support import (
    Cluster,
    Recorder,
    figures,
    holder_overlaps,
    now_ms,
    status,
    wait_converged,
)
from tests.e2e.support import ChildConsumer, wait_until
from tests.postgres_server import PostgresServer
from tests.redis_server import RedisServer
from tests.servers import require_binary, unavailable

AHEAD_S = 0.5
GUARD = {"DEJAQ_SKEW_MAX_MS": "100"}  # the default guard, which these stories are about
MESSAGES = 300
LEASE_MS = 1_000
HELD = 30


@pytest.fixture(params=["redis", "postgres"])
def served_cluster(request: pytest.FixtureRequest, cluster: Cluster) -> Iterator[Cluster]:
    """The cluster on a served backend, emptied for the test."""
    if request.param == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis.flush()
        cluster.storage_url = redis.url
    else:
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        pg.reset()
        cluster.storage_url = pg.url()
    yield cluster


async def test_a_broker_ahead_delivers_nothing_early_and_takes_no_held_message(
    served_cluster: Cluster,
) -> None:
    cluster = served_cluster
    # Given two brokers on true time and a third whose clock runs 500 ms ahead
    on_time = cluster.start(2, **GUARD)
    [ahead] = cluster.start(1, **GUARD, LD_PRELOAD=str(_libfaketime()), FAKETIME=f"+{AHEAD_S}")
    addresses = [b.address for b in (*on_time, ahead)]
    skews = await _skews(addresses[0])
    assert skews[ahead.address] >= AHEAD_S * 1000 - 100, skews  # the clock really is ahead
    topic = "one-clock"
    async with Client(addresses[0]) as client:
        await Admin(client).create_topic(topic, TopicSettings(buckets=24, lease_ms=LEASE_MS))
        # and messages due now, taken by a consumer process on a broker on true
        # time that holds them under a 1 s lease
        held = [Outgoing(b"held", now_ms(), id=f"held-{i}") for i in range(HELD)]
        async with Producer(client, topic) as producer:
            await producer.send_batch(held)
    holder = await ChildConsumer.start(addresses[0], topic, count=HELD, lease_ms=LEASE_MS)
    # When the holder dies without a word, and consumers on every broker (the
    # one ahead included) take over its buckets
    await holder.kill()
    recorder = Recorder()
    for i, address in enumerate(addresses):
        await recorder.add(f"c{i}", [address], topic)
    await wait_converged(addresses, topic, consumers=3)
    # and messages fall due over the next 2.5 s
    rng = random.Random(3)
    start = now_ms() + 500
    fresh = [Outgoing(b"x", start + rng.randrange(2000), id=f"m{i}") for i in range(MESSAGES)]
    async with Client(addresses[0]) as client, Producer(client, topic) as producer:
        results = await producer.send_batch(fresh)
        assert {r.status for r in results} == {InsertStatus.ACCEPTED}
    try:
        await recorder.wait_for([m.id for m in fresh] + [m.id for m in held], timeout_s=20)
    finally:
        await recorder.close()
    # Then nothing was delivered before its time (the held ones: before their lease ran out)
    early = [s for s in recorder.seen if s.received_ms < s.due_ms]
    assert not early, early[:5]
    held_until = holder.lease_until
    taken_over = [s for s in recorder.seen if s.id in held_until]
    assert len(taken_over) == HELD
    assert all(s.received_ms >= held_until[s.id] for s in taken_over), [
        (s.id, s.received_ms - held_until[s.id]) for s in taken_over
    ]
    # and no message had two holders at once
    assert holder_overlaps(recorder.seen) == []
    # and the broker ahead did deliver its share
    print("lateness", figures([s.lateness_ms for s in recorder.seen]))
    assert len(recorder.seen) == MESSAGES + HELD


async def test_on_sqlite_the_broker_stepped_ahead_stops_and_its_consumer_moves(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given three brokers on one SQLite file (each broker's own clock judges
    # "due"), the third's wall clock steppable
    shift = tmp_path / "shift"
    shift.write_text("+0\n")
    on_time = cluster.start(2, **GUARD)
    [ahead] = cluster.start(
        1,
        **GUARD,
        LD_PRELOAD=str(_libfaketime()),
        FAKETIME_TIMESTAMP_FILE=str(shift),
        FAKETIME_CACHE_DURATION="1",  # read the file again every second
        # a step moves the wall clock only, as NTP or an operator does: the
        # monotonic clock never steps
        FAKETIME_DONT_FAKE_MONOTONIC="1",
    )
    addresses = [b.address for b in (*on_time, ahead)]
    topic = "guarded"
    async with Client(addresses[0]) as client:
        await Admin(client).create_topic(topic, TopicSettings(buckets=24, lease_ms=LEASE_MS))
    recorder = Recorder()
    try:
        # serving (its guard has heard the others' clocks and found its own on time)
        await wait_until(lambda: _serving(ahead.address), 10, "the third to serve")
        # and a consumer on each, the one on the third given the others to fail over to
        await recorder.add("c0", [addresses[0]], topic)
        await recorder.add("c1", [addresses[1]], topic)
        await recorder.add("c2", [ahead.address, *addresses[:2]], topic)
        await wait_converged(addresses, topic, consumers=3)
        assert await _broker_of("c2", addresses[0], topic) == ahead.address
        # When the third's wall clock is stepped 500 ms ahead
        shift.write_text(f"+{AHEAD_S}\n")
        # Then its guard stops it: it says it is not serving
        await wait_until(lambda: _not_serving(ahead.address), 10, "the guard to stop it")

        # and its consumer moves to a broker on time
        async def moved() -> bool:
            return await _broker_of("c2", addresses[0], topic) in addresses[:2]

        await wait_until(moved, 20, "c2 to move to a broker on time")
        # and a consumer that asks it alone is refused, saying why
        async with Client([ahead.address], timeout_s=5) as alone:
            with pytest.raises(BrokerUnavailable, match="does not serve consumers"):
                await Consumer(alone, topic).start()
        # while one given it first and another broker starts on the other
        async with (
            Client([ahead.address, addresses[0]], timeout_s=5) as either,
            Consumer(either, topic),
        ):
            assert either.address == addresses[0]
        # When messages fall due over the next 1.5 s
        rng = random.Random(5)
        start = now_ms() + 300
        fresh = [Outgoing(b"x", start + rng.randrange(1500), id=f"m{i}") for i in range(MESSAGES)]
        async with Client(addresses[0]) as client, Producer(client, topic) as producer:
            results = await producer.send_batch(fresh)
            assert {r.status for r in results} == {InsertStatus.ACCEPTED}
        # Then every one is delivered, through the brokers on time
        await recorder.wait_for([m.id for m in fresh], timeout_s=20)
        # When its clock is set right again
        shift.write_text("+0\n")
        # Then it serves again, consumers included
        await wait_until(lambda: _serving(ahead.address), 10, "the guard to let it go")
        await wait_until(lambda: _takes_a_consumer(ahead.address, topic), 10, "a consumer")
    finally:
        await recorder.close()
    # and nothing came early, nor had two holders at once
    early = [s for s in recorder.seen if s.received_ms < s.due_ms]
    assert not early, early[:5]
    assert holder_overlaps(recorder.seen) == []
    print("lateness", figures([s.lateness_ms for s in recorder.seen]))


async def _takes_a_consumer(address: str, topic: str) -> bool:
    """A consumer of ``topic`` may start on ``address`` alone."""
    try:
        async with Client([address], timeout_s=5) as alone, Consumer(alone, topic):
            return True
    except BrokerUnavailable:
        return False


async def _broker_of(consumer: str, address: str, topic: str) -> str:
    """The broker ``consumer`` of ``topic`` is on, as ``address`` sees it ("" if none)."""
    s = await status(address)
    [t] = [t for t in s.topics if t.name == topic]
    return next((c.broker for c in t.consumers if c.id == consumer), "")


async def _serving(address: str) -> bool:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service="dejaq.v1.Timeline"))
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


async def _not_serving(address: str) -> bool:
    return not await _serving(address)


async def test_on_sqlite_a_broker_that_joins_with_its_clock_off_is_never_ready(
    cluster: Cluster,
) -> None:
    # Given a broker on true time
    cluster.start(1, **GUARD)
    # When a second one joins on the same SQLite file with its clock 500 ms ahead
    [ahead] = cluster.start(1, **GUARD, LD_PRELOAD=str(_libfaketime()), FAKETIME=f"+{AHEAD_S}")
    # Then from its first answer on it says it does not serve (its guard holds
    # dispatch back: first until it has heard the other's clock, then for good)
    assert await _not_serving(ahead.address)
    skews = await _skews(ahead.address, brokers=2)
    assert min(skews.values()) <= -(AHEAD_S * 1000 - 100), skews  # it has heard the other
    assert await _not_serving(ahead.address)


def _libfaketime() -> Path:
    """Debian's libfaketime (package faketime), preloaded into the broker itself:
    the ``faketime`` wrapper would stand between the broker and its signals."""
    binary = Path(require_binary("faketime")).resolve()
    found = sorted(binary.parent.parent.glob("lib/*/faketime/libfaketime.so.1"))
    if not found:
        unavailable(f"libfaketime.so.1 is not installed beside {binary}")
    return found[0]


async def _skews(address: str, brokers: int = 3) -> dict[str, int]:
    """Each broker's clock minus ``address``'s, once every broker has been heard from."""
    found: dict[str, int] = {}

    async def heard() -> bool:
        s = await status(address)
        found.clear()
        found.update({b.address: b.skew_ms for b in s.brokers if b.skew_ms is not None})
        return len(found) == len(s.brokers) == brokers

    await wait_until(heard, 15, "every broker's clock")
    return found
