"""Identity and permissions on a broker with ``--auth``: tokens, the grant each
RPC needs per topic pattern, trimmed listings, open health checks, and
refusals that change nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from dejaq.core.errors import DejaqError, InvalidArgument, PermissionDenied, Unauthenticated
from dejaq.core.model import InsertStatus
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.cluster import cluster_status
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Producer
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import create_topic, frame, now_ms, produce_one, produce_sync
from tests.security.support import ONLY, TOKENS, cli, client

HOUR_MS = 3_600_000
Call = Callable[[Client, str, str, int], Awaitable[Any]]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _produce(c: Client, topic: str, mid: str, version: int) -> Any:
    async with Producer(c, topic) as producer:
        return await producer.send(b"more", delay_ms=HOUR_MS)


async def _consume(c: Client, topic: str, mid: str, version: int) -> Any:
    consumer = await Consumer(c, topic).start()
    await consumer.close()


def _unary(method: str, build: Callable[[str, str, int], Any]) -> Call:
    async def call(c: Client, topic: str, mid: str, version: int) -> Any:
        return await c.call(method, build(topic, mid, version))

    return call


# Every RPC that acts on a topic, with the permission it needs (permissions.py).
CALLS: dict[str, tuple[str, Call]] = {
    "CreateTopic": ("admin", _unary("CreateTopic", lambda t, m, v: pb.CreateTopicRequest(name=t))),
    "UpdateTopic": (
        "admin",
        _unary("UpdateTopic", lambda t, m, v: pb.UpdateTopicRequest(name=t, max_rate=100.0)),
    ),
    "Redrive": ("admin", _unary("Redrive", lambda t, m, v: pb.RedriveRequest(topic=t))),
    "DescribeTopic": (
        "describe",
        _unary("DescribeTopic", lambda t, m, v: pb.DescribeTopicRequest(name=t)),
    ),
    "GetMessage": (
        "describe",
        _unary("GetMessage", lambda t, m, v: pb.GetMessageRequest(topic=t, id=m)),
    ),
    "ListDead": ("describe", _unary("ListDead", lambda t, m, v: pb.ListDeadRequest(topic=t))),
    "ScanBucket": ("describe", _unary("ScanBucket", lambda t, m, v: pb.ScanBucketRequest(topic=t))),
    "ListByDue": ("describe", _unary("ListByDue", lambda t, m, v: pb.ListByDueRequest(topic=t))),
    "Produce": ("produce", _produce),
    "Move": (
        "produce",
        _unary(
            "Move",
            lambda t, m, v: pb.MoveRequest(
                topic=t, id=m, version=v, timestamp_ms=now_ms() + 7 * HOUR_MS
            ),
        ),
    ),
    "CronAdd": (
        "produce",
        _unary("CronAdd", lambda t, m, v: pb.CronEntry(topic=t, id="c", schedule="0 9 * * *")),
    ),
    "CronUpdate": (
        "produce",
        _unary("CronUpdate", lambda t, m, v: pb.CronUpdateRequest(topic=t, id="c", paused=True)),
    ),
    "CronGet": ("describe", _unary("CronGet", lambda t, m, v: pb.CronGetRequest(topic=t, id="c"))),
    "CronList": ("describe", _unary("CronList", lambda t, m, v: pb.CronListRequest(topic=t))),
    "CronDelete": (
        "produce",
        _unary("CronDelete", lambda t, m, v: pb.CronDeleteRequest(topic=t, id="c")),
    ),
    "Consume": ("consume", _consume),
    "Ack": (
        "consume",
        _unary("Ack", lambda t, m, v: pb.AckRequest(topic=t, id=m, version=v, consumer_id="c")),
    ),
    "Extend": (
        "consume",
        _unary(
            "Extend",
            lambda t, m, v: pb.ExtendRequest(
                topic=t, id=m, version=v, consumer_id="c", lease_ms=1000
            ),
        ),
    ),
    "Nack": (
        "consume",
        _unary("Nack", lambda t, m, v: pb.NackRequest(topic=t, id=m, version=v, consumer_id="c")),
    ),
    # Destructive ones last: the allowed run ends with them.
    "Cancel": (
        "produce",
        _unary("Cancel", lambda t, m, v: pb.CancelRequest(topic=t, id=m, version=v)),
    ),
    "DeleteTopic": ("admin", _unary("DeleteTopic", lambda t, m, v: pb.DeleteTopicRequest(name=t))),
}


async def _state(admin: Client, topic: str, mid: str) -> tuple[Any, ...]:
    info = await Admin(admin).describe_topic(topic)
    m = (await Admin(admin).get(topic, mid)).message
    crons = (await admin.call("CronList", pb.CronListRequest(topic=topic))).entries
    return (info.topic, info.counts, m.version, m.timestamp, m.lease_owner, list(crons))


async def _seed(admin: Client, topic: str) -> tuple[str, int]:
    await create_topic(admin, topic)
    entry = pb.CronEntry(topic=topic, id="c", schedule="0 9 1 1 *", payload=b"yearly")
    await admin.call("CronAdd", entry, idempotent=False)
    mid = await produce_one(admin, topic, now_ms() + HOUR_MS)
    return mid, (await Admin(admin).get(topic, mid)).message.version


@pytest.mark.parametrize("principal", list(ONLY))
async def test_each_rpc_needs_its_grant_and_a_refusal_changes_nothing(
    auth_broker: BrokerProcess, principal: str
) -> None:
    async with (
        client(auth_broker.address, token=TOKENS["admin"]) as admin,
        client(auth_broker.address, token=TOKENS[principal]) as caller,
    ):
        topic = _name("t")
        mid, version = await _seed(admin, topic)
        before = await _state(admin, topic, mid)
        has = ONLY[principal]
        for _rpc, (needs, call) in CALLS.items():
            if has not in (needs, "admin"):
                with pytest.raises(PermissionDenied, match=f"no '{needs}' grant for topic"):
                    await call(caller, topic, mid, version)
        assert await _state(admin, topic, mid) == before
        for _rpc, (needs, call) in CALLS.items():
            if has in (needs, "admin"):
                try:
                    await call(caller, topic, mid, version)
                except (PermissionDenied, Unauthenticated):
                    raise
                except DejaqError:
                    pass  # past the guard: the call's own verdict (not leased, exists...)


@pytest.mark.parametrize("principal", [p for p in ONLY if p != "admin"])  # admin holds '*'
async def test_a_grant_covers_only_its_topic_pattern(
    auth_broker: BrokerProcess, principal: str
) -> None:
    async with (
        client(auth_broker.address, token=TOKENS["admin"]) as admin,
        client(auth_broker.address, token=TOKENS[principal]) as caller,
    ):
        topic = _name("elsewhere")  # t-* is theirs; this is not
        mid, version = await _seed(admin, topic)
        before = await _state(admin, topic, mid)
        for _rpc, (_needs, call) in CALLS.items():
            with pytest.raises(PermissionDenied):
                await call(caller, topic, mid, version)
        assert await _state(admin, topic, mid) == before


async def test_listings_show_only_topics_the_caller_may_describe(
    auth_broker: BrokerProcess,
) -> None:
    async with (
        client(auth_broker.address, token=TOKENS["admin"]) as admin,
        client(auth_broker.address, token=TOKENS["alice"]) as alice,
    ):
        mine, not_mine = _name("shared"), _name("private")
        await create_topic(admin, mine)
        await create_topic(admin, not_mine)
        names = {t.name for t in await Admin(alice).list_topics()}
        assert mine in names and not_mine not in names
        consumer = await Consumer(admin, not_mine).start()
        try:
            status = await cluster_status(alice)
            assert not_mine not in {t.name for t in status.topics}
            assert not_mine in {t.name for t in (await cluster_status(admin)).topics}
        finally:
            await consumer.close()


async def test_calls_without_a_known_token_are_unauthenticated(
    auth_broker: BrokerProcess,
) -> None:
    async with client(auth_broker.address, token=TOKENS["admin"]) as admin:
        topic = await create_topic(admin, _name("t"))
    async with client(auth_broker.address) as nobody:
        with pytest.raises(Unauthenticated, match="no credentials"):
            await Admin(nobody).list_topics()
        with pytest.raises(Unauthenticated):
            await Consumer(nobody, topic).start()
        with pytest.raises(Unauthenticated):
            await _produce(nobody, topic, "", 0)
    async with client(auth_broker.address, token="tok-guessed") as guesser:
        with pytest.raises(Unauthenticated, match="unknown token"):
            await Admin(guesser).describe_topic(topic)
    async with client(auth_broker.address, token=TOKENS["admin"]) as admin:
        assert (await Admin(admin).describe_topic(topic)).counts.waiting == 0


async def test_authorization_must_be_a_bearer_token(auth_broker: BrokerProcess) -> None:
    async with grpc.aio.insecure_channel(auth_broker.address) as channel:
        stub = pb_grpc.TimelineStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.ListTopics(
                pb.ListTopicsRequest(), metadata=(("authorization", "Basic YWxpY2U6cHc="),)
            )
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "Bearer TOKEN" in (info.value.details() or "")


async def test_health_and_reflection_stay_open(auth_broker: BrokerProcess) -> None:
    async with grpc.aio.insecure_channel(auth_broker.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service="dejaq.v1.Timeline"))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        ask = reflection_pb2.ServerReflectionRequest(list_services="")
        (answer,) = [a async for a in reflection.ServerReflectionInfo(iter([ask]))]
        assert "dejaq.v1.Timeline" in {s.name for s in answer.list_services_response.service}


def test_a_client_will_not_send_a_token_in_plaintext_off_the_machine() -> None:
    refused = r"refusing to send a token in plaintext to 192\.0\.2\.1"
    with pytest.raises(InvalidArgument, match=refused):
        Client("127.0.0.1:7700,192.0.2.1:7700", tls=False, token="secret")
    done = cli("topic", "list", "--broker", "192.0.2.1:7700", env={"DEJAQ_TOKEN": "secret"})
    assert done.returncode == 1
    assert "refusing to send a token in plaintext to 192.0.2.1:7700" in done.stderr
    assert "secret" not in done.stderr


def test_the_cli_sends_its_token(auth_broker: BrokerProcess) -> None:
    topic = _name("t")
    denied = cli(
        "topic", "create", topic, "--broker", auth_broker.address, "--token", TOKENS["alice"]
    )
    assert denied.returncode == 1 and "no 'admin' grant" in denied.stderr
    env = {"DEJAQ_BROKER": auth_broker.address, "DEJAQ_TOKEN": TOKENS["admin"]}
    created = cli("topic", "create", topic, env=env)
    assert created.returncode == 0, created.stderr
    listed = cli("topic", "list", env=env)
    assert topic in listed.stdout


async def test_a_produce_stream_stops_at_the_first_refused_frame(
    auth_broker: BrokerProcess,
) -> None:
    async with client(auth_broker.address, token=TOKENS["admin"]) as admin:
        mine, theirs = _name("t"), _name("elsewhere")  # producer may produce on t-* only
        await create_topic(admin, mine)
        await create_topic(admin, theirs)
        # When the producer sends a frame it may, one it may not, then one it may
        frames = [frame(mine, "first"), frame(theirs, "refused"), frame(mine, "after")]
        code, answers = await asyncio.to_thread(
            produce_sync, auth_broker.address, frames, TOKENS["producer"]
        )
        # Then the stream ends at the refused frame: the one before it is stored
        # (its answer may be dropped by gRPC as the stream ends), none after it
        assert code == grpc.StatusCode.PERMISSION_DENIED
        assert answers in ([], [([int(InsertStatus.ACCEPTED)], ["first"])])
        assert (await Admin(admin).describe_topic(theirs)).counts.waiting == 0
        assert (await Admin(admin).describe_topic(mine)).counts.waiting == 1
