"""Consuming over HTTP against a broker process (memory, --http): lease with a
long poll, then ack, nack, extend by lease token; an expired lease delivers
again and its stale token is refused; HTTP and gRPC consumers share a topic."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import consuming, counts, create_topic, now_ms, produce, wait_until


@pytest.fixture(scope="module")
def http_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    log = tmp_path_factory.mktemp("http-pull") / "broker.log"
    process = BrokerProcess("memory://", log, args=["--http", "127.0.0.1:0"]).start()
    try:
        yield process
    finally:
        assert process.stop() == 0


class Http:
    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url, self.session = url, session

    async def call(self, path: str, body: Any) -> tuple[int, Any]:
        async with self.session.post(self.url + path, json=body) as answer:
            return answer.status, await answer.json(content_type=None)

    async def lease(self, topic: str, **body: Any) -> list[dict[str, Any]]:
        status, doc = await self.call(f"/v1/topics/{topic}/lease", body)
        assert status == 200, doc
        return list(doc["deliveries"])

    async def settle(self, topic: str, kind: str, tokens: list[str], **body: Any) -> list[Any]:
        status, doc = await self.call(
            f"/v1/topics/{topic}/{kind}", {"lease_tokens": tokens, **body}
        )
        assert status == 200, doc
        return list(doc["results"])


@pytest.fixture
async def http(http_broker: BrokerProcess) -> AsyncIterator[Http]:
    async with aiohttp.ClientSession() as session:
        yield Http(http_broker.http_url, session)


@pytest.fixture
async def client(http_broker: BrokerProcess) -> AsyncIterator[Client]:
    async with Client(http_broker.address) as c:
        yield c


async def test_a_leased_message_is_acked_and_gone(
    http: Http, client: Client, topic_name: str
) -> None:
    # given a due message with a key and headers
    topic = await create_topic(client, topic_name)
    at = now_ms()
    await produce(client, topic, [Outgoing(b"hello", at, id="m1", key="k", headers={"a": "b"})])
    # when an HTTP consumer leases it
    (d,) = await http.lease(topic, max=10, wait_ms=5000)
    # then it gets the message, its due time, key, headers and first delivery
    assert (d["id"], d["payload"], d["key"], d["headers"]) == ("m1", "hello", "k", {"a": "b"})
    assert (d["timestamp_ms"], d["deliveries"]) == (at, 1)
    # and its ack settles it: the message is gone
    (result,) = await http.settle(topic, "ack", [d["lease_token"]])
    assert result["ok"] and result["version"] == 0, result
    assert await counts(client, topic) == (0, 0, 0, 0)


async def test_a_nack_with_a_delay_delivers_again_after_it(
    http: Http, client: Client, topic_name: str
) -> None:
    # given a leased message
    topic = await create_topic(client, topic_name)
    await produce(client, topic, [Outgoing(b"x", now_ms(), id="m1")])
    (d,) = await http.lease(topic, wait_ms=5000)
    # when it is nacked with a delay of 300 ms
    nacked = now_ms()
    (result,) = await http.settle(topic, "nack", [d["lease_token"]], delay_ms=300)
    assert result["ok"], result
    # then it comes again, not before the delay, as its second delivery
    (again,) = await http.lease(topic, wait_ms=5000)
    assert again["id"] == "m1" and again["deliveries"] == 2
    assert again["timestamp_ms"] >= nacked + 300


async def test_an_extended_lease_is_not_delivered_again_when_the_first_runs_out(
    http: Http, client: Client, topic_name: str
) -> None:
    # given a message leased for 300 ms
    topic = await create_topic(client, topic_name)
    await produce(client, topic, [Outgoing(b"x", now_ms(), id="m1")])
    (d,) = await http.lease(topic, wait_ms=5000, lease_ms=300)
    # when its lease is extended to 10 s
    (result,) = await http.settle(topic, "extend", [d["lease_token"]], lease_ms=10_000)
    assert result["ok"], result
    # then a poll past the first lease gets nothing, and the renewed token acks
    assert await http.lease(topic, wait_ms=600) == []
    (acked,) = await http.settle(topic, "ack", [result["renewed_lease_token"]])
    assert acked["ok"], acked


async def test_an_expired_lease_is_delivered_again_and_its_stale_token_refused(
    http: Http, client: Client, topic_name: str
) -> None:
    # given a message leased for 200 ms and never settled
    topic = await create_topic(client, topic_name)
    await produce(client, topic, [Outgoing(b"x", now_ms(), id="m1")])
    (first,) = await http.lease(topic, wait_ms=5000, lease_ms=200)
    # when its lease runs out, another lease request gets it again
    (second,) = await http.lease(topic, wait_ms=5000, lease_ms=10_000)
    assert (second["id"], second["deliveries"]) == ("m1", 2)
    # then the first token is refused and changes nothing
    stale = await http.settle(topic, "ack", [first["lease_token"]])
    nacked = await http.settle(topic, "nack", [first["lease_token"]])
    assert [r["ok"] for r in stale + nacked] == [False, False], stale + nacked
    assert await counts(client, topic) == (0, 0, 1, 0)
    # while the current one acks
    (acked,) = await http.settle(topic, "ack", [second["lease_token"]])
    assert acked["ok"], acked
    assert await counts(client, topic) == (0, 0, 0, 0)


async def test_an_altered_token_is_refused_by_name_and_the_batch_goes_on(
    http: Http, client: Client, topic_name: str
) -> None:
    # given two leased messages
    topic = await create_topic(client, topic_name)
    await produce(client, topic, [Outgoing(b"x", now_ms(), id=i) for i in ("a", "b")])
    got = await http.lease(topic, max=2, wait_ms=5000)
    assert len(got) == 2
    token = got[0]["lease_token"]
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    # when a batch with something not a token at all is sent, it is refused whole
    status, doc = await http.call(f"/v1/topics/{topic}/ack", {"lease_tokens": [forged, 7]})
    assert (status, doc["code"]) == (400, "INVALID_ARGUMENT"), doc
    assert await counts(client, topic) == (0, 0, 2, 0)
    # when a batch acks an altered token and a good one
    results = await http.settle(topic, "ack", [forged, got[1]["lease_token"]])
    # then the altered one is refused, the good one applied
    assert [r["ok"] for r in results] == [False, True], results
    assert results[0]["code"] == "INVALID_ARGUMENT"
    assert await counts(client, topic) == (0, 0, 1, 0)


async def test_a_long_poll_answers_when_a_message_comes_due_not_after_the_wait(
    http: Http, client: Client, topic_name: str
) -> None:
    # given a message due in 500 ms
    topic = await create_topic(client, topic_name)
    due = now_ms() + 500
    await produce(client, topic, [Outgoing(b"x", due, id="m1")])
    # when a lease waits up to 10 s
    (d,) = await http.lease(topic, wait_ms=10_000)
    answered = now_ms()
    # then it answers when the message is due: never before, well before the wait ends
    assert due <= answered < due + 5_000
    assert d["id"] == "m1"


async def test_a_long_poll_with_nothing_due_answers_empty_after_the_wait(
    http: Http, client: Client, topic_name: str
) -> None:
    topic = await create_topic(client, topic_name)
    started = time.monotonic()
    assert await http.lease(topic, wait_ms=400) == []
    assert time.monotonic() - started >= 0.4


async def test_bad_lease_bodies_are_problems(http: Http, client: Client, topic_name: str) -> None:
    topic = await create_topic(client, topic_name)
    for body in ({"max": 0}, {"wait_ms": 20_001}, {"lease_ms": 1}, {"nope": 1}, {"max": "2"}):
        status, doc = await http.call(f"/v1/topics/{topic}/lease", body)
        assert (status, doc["code"]) == (400, "INVALID_ARGUMENT"), body
    status, doc = await http.call(f"/v1/topics/{topic}/ack", {"lease_tokens": []})
    assert status == 400, doc
    status, doc = await http.call("/v1/topics/absent/lease", {})
    assert status == 404, doc


async def test_http_and_grpc_consumers_share_a_topic_nothing_lost_nothing_twice(
    http: Http, client: Client, topic_name: str
) -> None:
    # given 300 messages due over about a second
    topic = await create_topic(client, topic_name)
    start = now_ms()
    ids = [f"m{i}" for i in range(300)]
    await produce(client, topic, [Outgoing(b"x", start + i * 3, id=m) for i, m in enumerate(ids)])
    by_http: list[str] = []
    by_grpc: list[str] = []

    async def http_worker() -> None:
        while len(by_http) + len(by_grpc) < len(ids):
            got = await http.lease(topic, max=5, wait_ms=500)
            if got:
                by_http.extend(d["id"] for d in got)
                results = await http.settle(topic, "ack", [d["lease_token"] for d in got])
                assert all(r["ok"] for r in results), results

    # when a gRPC consumer and two HTTP workers consume it together, acking all
    async with consuming(client, topic, credits=5) as inbox:

        async def grpc_worker() -> None:
            while len(by_http) + len(by_grpc) < len(ids):
                try:
                    d = await inbox.next(timeout_s=0.5)
                except (TimeoutError, AssertionError):
                    continue
                by_grpc.append(d.id)
                await d.ack(confirm=True)

        await asyncio.wait_for(asyncio.gather(http_worker(), http_worker(), grpc_worker()), 60)
    # then each got some, and every message was delivered exactly once
    assert by_http and by_grpc, (len(by_http), len(by_grpc))
    assert sorted(by_http + by_grpc) == sorted(ids)
    await wait_until(lambda: _empty(client, topic), what="every message acked")


async def _empty(client: Client, topic: str) -> bool:
    return await counts(client, topic) == (0, 0, 0, 0)


async def test_a_lease_without_a_wait_gets_what_is_due_already(
    http: Http, client: Client, topic_name: str
) -> None:
    # given a message already due
    topic = await create_topic(client, topic_name)
    await produce(client, topic, [Outgoing(b"x", now_ms() - 1000, id="m1")])
    # when a lease asks without waiting, then it gets it
    await wait_until(lambda: _leases_one(http, topic), what="a lease with wait_ms 0 gets it")


async def _leases_one(http: Http, topic: str) -> bool:
    return len(await http.lease(topic, wait_ms=0)) == 1


async def _events(response: aiohttp.ClientResponse, n: int) -> list[dict[str, Any]]:
    """The next ``n`` delivery events of an event stream."""
    found: list[dict[str, Any]] = []
    kind = ""
    while len(found) < n:
        line = (await asyncio.wait_for(response.content.readline(), 10)).decode().rstrip("\n")
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: ") and kind == "delivery":
            found.append(json.loads(line.removeprefix("data: ")))
    return found


async def test_an_event_stream_delivers_within_its_credits_and_acks_return_them(
    http: Http, client: Client, topic_name: str
) -> None:
    # given 3 due messages and an event stream with 2 credits
    topic = await create_topic(client, topic_name)
    await produce(client, topic, [Outgoing(b"x", now_ms(), id=f"m{i}") for i in range(3)])
    url = f"{http.url}/v1/topics/{topic}/deliveries?credits=2"
    async with http.session.get(url) as stream:
        assert stream.status == 200
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        # when it has delivered 2, the third waits: no credit left
        first = await _events(stream, 2)
        assert await counts(client, topic) == (0, 1, 2, 0)
        # then an ack of one returns its credit, and the third comes
        (acked,) = await http.settle(topic, "ack", [first[0]["lease_token"]])
        assert acked["ok"], acked
        (third,) = await _events(stream, 1)
        assert {d["id"] for d in [*first, third]} == {"m0", "m1", "m2"}
        results = await http.settle(topic, "ack", [first[1]["lease_token"], third["lease_token"]])
        assert all(r["ok"] for r in results), results
    assert await counts(client, topic) == (0, 0, 0, 0)


async def test_a_bad_event_stream_query_is_a_problem(
    http: Http, client: Client, topic_name: str
) -> None:
    topic = await create_topic(client, topic_name)
    for query in ("credits=0", "credits=x", "lease_ms=1", "nope=1"):
        url = f"{http.url}/v1/topics/{topic}/deliveries?{query}"
        async with http.session.get(url) as answer:
            assert answer.status == 400, query


async def test_a_client_that_leaves_a_long_poll_holds_nothing(
    http: Http, client: Client, topic_name: str
) -> None:
    # given a long poll whose client leaves before a message comes due
    topic = await create_topic(client, topic_name)
    due = now_ms() + 300
    await produce(client, topic, [Outgoing(b"x", due, id="m1")])
    timeout = aiohttp.ClientTimeout(total=0.1)
    with contextlib.suppress(TimeoutError):
        await http.session.post(
            f"{http.url}/v1/topics/{topic}/lease", json={"wait_ms": 2000}, timeout=timeout
        )
    # when another worker polls, then it gets the message as its first delivery
    (d,) = await http.lease(topic, wait_ms=5000)
    assert (d["id"], d["deliveries"]) == ("m1", 1)


async def test_a_message_nacked_past_its_max_deliveries_goes_to_the_dead_timeline(
    http: Http, client: Client, topic_name: str
) -> None:
    # given a topic of at most 2 deliveries a message
    topic = await create_topic(client, topic_name, max_deliveries=2)
    await produce(client, topic, [Outgoing(b"x", now_ms(), id="m1")])
    # when its two deliveries are both nacked
    for n in (1, 2):
        (d,) = await http.lease(topic, wait_ms=5000)
        assert d["deliveries"] == n
        (nacked,) = await http.settle(topic, "nack", [d["lease_token"]])
        assert nacked["ok"], nacked
    # then it is dead, as its last nack said (version 0)
    assert nacked["version"] == 0
    assert await counts(client, topic) == (0, 0, 0, 1)
