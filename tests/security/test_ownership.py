"""Lease ownership comes from the authenticated caller: principal B cannot
ack, extend or nack principal A's lease, even under A's consumer id, on the
unary calls or on a Consume stream of its own; A's own unary calls work."""

from __future__ import annotations

import uuid

import pytest

from dejaq.core.errors import NotLeaseHolder
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.proto import dejaq_pb2 as pb
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.raw_calls import hello
from tests.e2e.support import consuming, create_topic, now_ms, produce_one
from tests.security.support import TOKENS, client

LEASE_MS = 60_000


@pytest.fixture(params=["auth_broker", "tls_auth_broker"])
def owned_broker(request: pytest.FixtureRequest) -> BrokerProcess:
    """Plaintext on memory://, and TLS on SQLite: the owner is stored either way."""
    broker: BrokerProcess = request.getfixturevalue(request.param)
    return broker


def _client(broker: BrokerProcess, principal: str, request: pytest.FixtureRequest) -> Client:
    certs = request.getfixturevalue("certs") if broker.storage.startswith("sqlite") else None
    return client(broker.address, certs, token=TOKENS[principal])


async def _snapshot(c: Client, topic: str, mid: str) -> tuple[object, ...]:
    m = (await Admin(c).get(topic, mid)).message
    counts = (await Admin(c).describe_topic(topic)).counts
    return (m.version, m.timestamp, m.lease_owner, m.deliveries, counts)


async def test_another_principal_cannot_settle_a_lease_even_by_its_consumer_id(
    owned_broker: BrokerProcess, request: pytest.FixtureRequest
) -> None:
    admin = _client(owned_broker, "admin", request)
    alice = _client(owned_broker, "alice", request)
    bob = _client(owned_broker, "bob", request)
    async with admin, alice, bob:
        topic = await create_topic(admin, f"shared-{uuid.uuid4().hex[:8]}", lease_ms=LEASE_MS)
        mid = await produce_one(alice, topic, now_ms())
        async with consuming(alice, topic, consumer_id="worker") as inbox:
            d = await inbox.next()
            held = await _snapshot(alice, topic, mid)
            assert held[2] == "alice#worker"

            b = Admin(bob)
            refused = NotLeaseHolder
            with pytest.raises(refused, match="not leased by consumer 'bob#worker'"):
                await b.ack(topic, mid, d.version, "worker")
            with pytest.raises(refused, match="not leased by consumer 'bob#worker'"):
                await b.extend(topic, mid, d.version, "worker", LEASE_MS)
            with pytest.raises(refused, match="not leased by consumer 'bob#worker'"):
                await b.nack(topic, mid, d.version, "worker")
            # Bob's own stream under the same consumer id is a consumer of his own.
            settles = [
                pb.ConsumeRequest(
                    settle=pb.Settle(kind=kind, ids=[mid], versions=[d.version], ms=1000, token=n)
                )
                for n, kind in enumerate((pb.Settle.ACK, pb.Settle.EXTEND, pb.Settle.NACK), 1)
            ]
            call = bob.stub().Consume()
            await call.write(hello(topic, consumer_id="worker", credits=1))
            welcome = await call.read()
            assert welcome.welcome.consumer_id == "worker"
            for frame in settles:
                await call.write(frame)
                answer = await call.read()
                assert [r.index for r in answer.settled.rejections] == [0]
                assert "not leased by" in answer.settled.rejections[0].reason
            await call.write(pb.ConsumeRequest(goodbye=pb.Goodbye()))
            await call.done_writing()
            assert await _snapshot(alice, topic, mid) == held

            # Alice settles her own lease through the unary call, by consumer id.
            done = await Admin(alice).extend(topic, mid, d.version, "worker", LEASE_MS)
            done = await Admin(alice).ack(topic, mid, done.version, "worker")
            assert done.version == 0
        assert (await Admin(admin).describe_topic(topic)).counts.leased == 0


async def test_two_principals_may_use_the_same_consumer_id_at_once(
    auth_broker: BrokerProcess,
) -> None:
    async with (
        client(auth_broker.address, token=TOKENS["admin"]) as admin,
        client(auth_broker.address, token=TOKENS["alice"]) as alice,
        client(auth_broker.address, token=TOKENS["bob"]) as bob,
    ):
        topic = await create_topic(admin, f"shared-{uuid.uuid4().hex[:8]}")
        async with consuming(alice, topic, consumer_id="w"), consuming(bob, topic, consumer_id="w"):
            described = await Admin(admin).describe_topic(topic)
            assert described.consumers == 2


async def test_anonymous_mode_is_one_principal(anonymous_broker: BrokerProcess) -> None:
    """Without --auth the owner is the bare consumer id: anyone naming it may settle."""
    async with (
        Client(anonymous_broker.address, tls=False) as c,
        Client(anonymous_broker.address, tls=False) as stranger,
    ):
        topic = await create_topic(c, f"anon-{uuid.uuid4().hex[:8]}", lease_ms=LEASE_MS)
        mid = await produce_one(c, topic, now_ms())
        async with consuming(c, topic, consumer_id="anon-worker") as inbox:
            d = await inbox.next()
            assert (await Admin(c).get(topic, mid)).message.lease_owner == "anon-worker"
            done = await Admin(stranger).ack(topic, mid, d.version, "anon-worker")
            assert done.version == 0
