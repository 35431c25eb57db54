"""Redis Stream -> dejaq -> Redis Stream against real redis-servers: every
message once, in due order within its key, none before its time; what the
rule cannot read goes to the dead timeline with its reason; restarts of the
source's and the sink's servers lose nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, defaultdict

import pytest
import redis

from dejaq.bridges import config, rules
from dejaq.bridges.metrics import BridgeMetrics, figures
from dejaq.bridges.runner import Bridge
from dejaq.core.clock import now_ms
from dejaq.core.model import TopicSettings
from dejaq.driver import Admin, embedded
from tests.bridges.support import TOPIC, bridges_file, p99, published, until, write
from tests.redis_server import RedisServer
from tests.servers import require_binary, temporary_root

pytestmark = pytest.mark.timeout(120)

COUNT = 50_000
SPREAD_MS = 20_000
# The first is due this long after it is written: every message reaches dejaq
# before its time (one that came late could not be put back in order).
LEAD_MS = 5_000


@pytest.fixture
def streams(redis_server: RedisServer) -> redis.Redis:
    redis_server.flush()
    return redis_server.client()


async def test_fifty_thousand_out_of_order_leave_in_due_order_each_once_none_early(
    redis_server: RedisServer, streams: redis.Redis
) -> None:
    # Given a bridge from stream in to stream out through the topic
    (spec,) = config.parse(bridges_file(redis_server.url, redis_server.url))
    async with embedded("memory://") as client:
        await Admin(client).create_topic(TOPIC)
        metrics = BridgeMetrics()
        stop = asyncio.Event()
        running = asyncio.create_task(Bridge(spec, client, metrics).run(stop))
        try:
            # When 50,000 messages arrive out of order, due over 20 s, with two
            # the rule cannot read and one sent twice
            write(streams, COUNT, SPREAD_MS, lead_ms=LEAD_MS)
            streams.xadd("in", {"payload": "x", "id": "no-due", "user": "u0"})
            streams.xadd("in", {"payload": "x", "id": "bad", "due_ms": "soon", "user": "u0"})
            again = {
                "payload": "again",
                "id": "m7",
                "due_ms": str(now_ms() + LEAD_MS),
                "user": "u7",
            }
            streams.xadd("in", again)  # type: ignore[arg-type]
            bad_header = {"payload": "x", "id": "h", "due_ms": again["due_ms"], "a b": "c"}
            streams.xadd("in", bad_header)  # type: ignore[arg-type]
            await until(lambda: _count(metrics, "accepted") > COUNT, 60, "every one in dejaq")
            all_in_ms = now_ms()
            await until(lambda: streams.xlen("out") >= COUNT, 60, "all published")
            await until(lambda: _count(metrics, "published") >= COUNT, 10, "all counted")
        finally:
            stop.set()
            await running
        dead = {info.message.id: info.headers for info in await Admin(client).list_dead(TOPIC)}
    out = published(streams)
    # Then each is published once
    ids = Counter(p.id for p in out)
    assert len(out) == COUNT and set(ids) == {f"m{i}" for i in range(COUNT)}
    # none before its time, and in due order within each key: of those that
    # reached dejaq before their time (one that came late cannot be put back)
    assert all(p.at_ms >= p.due_ms for p in out)
    by_key: dict[str, list[int]] = defaultdict(list)
    for p in out:
        if p.due_ms > all_in_ms:
            by_key[p.user].append(p.due_ms)
    in_time = sum(map(len, by_key.values()))
    print(f"{in_time} of {COUNT} reached dejaq before their time")
    assert in_time >= 1000
    assert all(dues == sorted(dues) for dues in by_key.values())
    # the unreadable ones went to the dead timeline with their reasons
    reasons = {h[rules.ERROR_HEADER] for h in dead.values()}
    assert len(dead) == 3
    assert any("no due field 'due_ms'" in r for r in reasons)
    assert any("'soon' is not epoch milliseconds" in r for r in reasons)
    assert any(r.startswith("headers: ") for r in reasons)
    # and publish lateness is reported (its target is measured by the benchmark)
    late = p99([p.at_ms - p.due_ms for p in out if p.due_ms > all_in_ms])
    print(f"publish lateness p99 {late} ms of those in dejaq in time (the sink server's clock)")
    assert late < 5_000
    shown = figures(metrics.registry.collect())[spec.name]
    assert shown["published"] == COUNT and shown["unreadable"] == 3
    assert shown["accepted"] == COUNT + 1  # the one sent twice counts once more


def _count(metrics: BridgeMetrics, figure: str) -> int:
    return figures(metrics.registry.collect()).get("reorder", {}).get(figure, 0)


async def test_restarts_of_the_source_and_the_sink_servers_lose_nothing() -> None:
    # Given a bridge between two servers that keep their data (AOF), apart
    binary = require_binary("redis-server")
    source = RedisServer(binary, temporary_root("bridge-source"), persistent=True)
    sink = RedisServer(binary, temporary_root("bridge-sink"), persistent=True)
    await asyncio.gather(asyncio.to_thread(source.start), asyncio.to_thread(sink.start))
    try:
        (spec,) = config.parse(bridges_file(source.url, sink.url))
        async with embedded("memory://") as client:
            await Admin(client).create_topic(TOPIC, TopicSettings(lease_ms=2000))
            metrics = BridgeMetrics()
            stop = asyncio.Event()
            running = asyncio.create_task(Bridge(spec, client, metrics).run(stop))
            try:
                with source.client() as into, sink.client() as out:
                    # When messages flow, and the source's server is killed and
                    # started again while more are written
                    write(into, 2000, 3000)
                    await until(lambda: out.xlen("out") > 200, 30, "publishing began")
                    source.kill()
                    await asyncio.to_thread(source.start)
                with source.client() as into, sink.client() as out:
                    write(into, 2000, 3000, first=2000)
                    # and then the sink's
                    await until(lambda: out.xlen("out") > 2500, 30, "publishing went on")
                    sink.kill()
                    await asyncio.sleep(0)  # the bridge sees the sink gone mid-run
                    await asyncio.to_thread(sink.start)
                with sink.client() as out:
                    want = {f"m{i}" for i in range(4000)}
                    await until(
                        lambda: {p.id for p in published(out)} >= want, 60, "every message out"
                    )
                    found = published(out)
            finally:
                stop.set()
                await running
        # Then every message came out, duplicates only of ids written, none early
        assert {p.id for p in found} == want
        assert all(p.at_ms >= p.due_ms for p in found)
        assert figures(metrics.registry.collect())[spec.name]["errors"] >= 2
    finally:
        for server in (source, sink):
            with contextlib.suppress(Exception):
                server.destroy()


async def test_a_source_key_of_another_type_is_waited_for_not_a_crash(
    redis_server: RedisServer, streams: redis.Redis
) -> None:
    # Given the source's key holding a string, not a stream
    streams.set("in", "not a stream")
    (spec,) = config.parse(bridges_file(redis_server.url, redis_server.url))
    async with embedded("memory://") as client:
        await Admin(client).create_topic(TOPIC)
        metrics = BridgeMetrics()
        stop = asyncio.Event()
        running = asyncio.create_task(Bridge(spec, client, metrics).run(stop))
        try:
            # When the bridge runs, then it counts the refusals and keeps trying
            await until(lambda: _errors(metrics) >= 2, 30, "the refusals counted")
            assert not running.done()
            # And once the key is a stream, its messages go through
            streams.delete("in")
            write(streams, 10, 10, lead_ms=0)
            await until(lambda: streams.xlen("out") >= 10, 30, "published after the fix")
        finally:
            stop.set()
            await running


def _errors(metrics: BridgeMetrics) -> int:
    return figures(metrics.registry.collect()).get("reorder", {}).get("errors", 0)


async def test_the_ends_speak_tls_with_a_password(tls_redis_server: RedisServer) -> None:
    # Given a server that takes only TLS with a client certificate, and a password
    tls_redis_server.flush()
    url = tls_redis_server.url.replace("rediss://", "rediss-stream://")
    (spec,) = config.parse(bridges_file(url, url))
    async with embedded("memory://") as client:
        await Admin(client).create_topic(TOPIC)
        stop = asyncio.Event()
        running = asyncio.create_task(Bridge(spec, client).run(stop))
        try:
            # When messages arrive, then they leave through the same server
            with tls_redis_server.client() as streams:
                write(streams, 10, 10, lead_ms=0)
                await until(lambda: streams.xlen("out") >= 10, 30, "published over TLS")
        finally:
            stop.set()
            await running


async def test_pending_entries_come_first_and_a_deleted_one_is_let_go(
    redis_server: RedisServer, streams: redis.Redis
) -> None:
    # Given two entries read by the bridge's consumer before a crash, never
    # acknowledged, one of them deleted from the stream since
    write(streams, 2, 10, lead_ms=0)
    streams.xgroup_create("in", "dejaq", id="0")
    (first, _), _ = streams.xreadgroup("dejaq", "dejaq", {"in": ">"}, count=2)[0][1]
    streams.xdel("in", first)
    (spec,) = config.parse(bridges_file(redis_server.url, redis_server.url))
    async with embedded("memory://") as client:
        await Admin(client).create_topic(TOPIC)
        stop = asyncio.Event()
        running = asyncio.create_task(Bridge(spec, client).run(stop))
        try:
            # When the bridge starts, then the other is published and both are acked
            await until(lambda: streams.xlen("out") >= 1, 30, "the pending one published")
            await until(
                lambda: streams.xpending("in", "dejaq")["pending"] == 0, 30, "nothing pending"
            )
        finally:
            stop.set()
            await running
    assert [p.id for p in published(streams)] == ["m1"]


async def test_a_payload_of_any_bytes_and_fields_of_any_text_leave_as_they_came(
    redis_server: RedisServer, streams: redis.Redis
) -> None:
    # Given entries whose payload holds every byte, or none, and fields of non-ASCII text
    due = str(now_ms())
    every_byte = bytes(range(256))
    streams.xadd(
        "in", {"payload": every_byte, "id": "a", "due_ms": due, "user": "u", "note": "été ✓"}
    )
    streams.xadd("in", {"id": "b", "due_ms": due, "user": "u", "payload": b""})
    (spec,) = config.parse(bridges_file(redis_server.url, redis_server.url))
    async with embedded("memory://") as client:
        await Admin(client).create_topic(TOPIC)
        stop = asyncio.Event()
        running = asyncio.create_task(Bridge(spec, client).run(stop))
        try:
            # When the bridge carries them
            await until(lambda: streams.xlen("out") >= 2, 30, "both published")
            await until(lambda: streams.xpending("in", "dejaq")["pending"] == 0, 30, "both acked")
        finally:
            stop.set()
            await running
    # Then each leaves with its payload and its fields as they came, in their order
    by_id = {fields[b"id"]: fields for _, fields in streams.xrange("out")}
    assert list(by_id[b"a"].items()) == [
        (b"payload", every_byte),
        (b"id", b"a"),
        (b"due_ms", due.encode()),
        (b"user", b"u"),
        (b"note", "été ✓".encode()),
    ]
    assert list(by_id[b"b"].items()) == [
        (b"payload", b""),
        (b"id", b"b"),
        (b"due_ms", due.encode()),
        (b"user", b"u"),
    ]
