"""HTTP consumers in a cluster: lease tokens signed with the key the brokers
share in etcd, so a token settles through any broker of the cluster and
through a broker that restarted since it leased; a polling worker's
registration lingers between its polls."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from dejaq.broker.http.pull import REGISTRATION_LINGER_S
from dejaq.core.clock import now_ms
from dejaq.driver import Client, Outgoing
from dejaq.driver.cluster import ClusterStatus
from tests.cluster.support import Cluster, status
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import counts, create_topic, produce, wait_until

HTTP = {"DEJAQ_HTTP": "127.0.0.1:0"}


async def _post(session: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with session.post(url, json=body) as answer:
        return answer.status, await answer.json(content_type=None)


async def _lease_one(session: aiohttp.ClientSession, broker: BrokerProcess, topic: str) -> str:
    url = f"{broker.http_url}/v1/topics/{topic}/lease"
    status, doc = await _post(session, url, {"max": 1, "wait_ms": 10_000, "lease_ms": 60_000})
    assert status == 200, doc
    (delivery,) = doc["deliveries"]
    return str(delivery["lease_token"])


async def _ack(
    session: aiohttp.ClientSession, broker: BrokerProcess, topic: str, token: str
) -> Any:
    url = f"{broker.http_url}/v1/topics/{topic}/ack"
    status, doc = await _post(session, url, {"lease_tokens": [token]})
    assert status == 200, doc
    (result,) = doc["results"]
    return result


async def test_a_token_leased_through_one_broker_settles_through_another(
    cluster: Cluster,
) -> None:
    # Given two brokers of one cluster serving HTTP, and a due message
    a, b = cluster.start(2, **HTTP)
    async with Client(a.address) as client, aiohttp.ClientSession() as session:
        topic = await create_topic(client, "tokens")
        await produce(client, topic, [Outgoing(b"x", now_ms(), id="m1")])
        # When it is leased through one broker and acked through the other
        token = await _lease_one(session, a, topic)
        result = await _ack(session, b, topic, token)
        # Then the ack is applied: the message is gone
        assert result.get("ok") is True, result
        assert await counts(client, topic) == (0, 0, 0, 0)


async def test_a_token_settles_through_its_broker_after_that_broker_restarted(
    cluster: Cluster,
) -> None:
    # Given a message leased over HTTP through a broker of a cluster
    (a,) = cluster.start(1, **HTTP)
    async with Client(a.address) as client, aiohttp.ClientSession() as session:
        topic = await create_topic(client, "restarted")
        await produce(client, topic, [Outgoing(b"x", now_ms(), id="m1")])
        token = await _lease_one(session, a, topic)
    # When that broker restarts (the only one: nothing of the cluster stays in memory)
    assert a.stop() == 0
    (again,) = cluster.start(1, **HTTP)
    async with Client(again.address) as client, aiohttp.ClientSession() as session:
        # Then the token still settles, through the new process
        result = await _ack(session, again, topic, token)
        assert result.get("ok") is True, result
        assert await counts(client, topic) == (0, 0, 0, 0)


def _consumers(s: ClusterStatus, topic: str) -> int:
    t = next((t for t in s.topics if t.name == topic), None)
    return 0 if t is None else len(t.consumers)


async def test_a_polling_worker_stays_registered_between_polls_and_leaves_after(
    cluster: Cluster,
) -> None:
    # Given a broker of a cluster, and a message an HTTP worker leases
    a, b = cluster.start(2, **HTTP)
    async with Client(a.address) as client, aiohttp.ClientSession() as session:
        topic = await create_topic(client, "lingering")
        await produce(client, topic, [Outgoing(b"x", now_ms(), id="m1")])
        await _lease_one(session, a, topic)
    # When the worker takes a second before it polls again
    await asyncio.sleep(1.0)
    # Then the cluster still counts it as the topic's consumer: no rebalance between polls
    assert _consumers(await status(b.address), topic) == 1
    # And once it has not polled for longer than the linger, it is no consumer any more
    await wait_until(
        lambda: _gone(b.address, topic), REGISTRATION_LINGER_S + 10, "the registration to go"
    )


async def _gone(address: str, topic: str) -> bool:
    return _consumers(await status(address), topic) == 0
