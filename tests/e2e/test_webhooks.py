"""Webhook delivery end to end: a broker process POSTs to a real HTTP sink on 127.0.0.1.

The broker runs with ``DEJAQ_WEBHOOK_ALLOW=127.0.0.1`` (loopback is refused
otherwise, as the last stories show, on the shared broker that has none).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import socket
import time
import urllib.request
from urllib.parse import unquote

import pytest

from dejaq.core import signature
from dejaq.core.errors import InvalidArgument, NotFound, WrongKind
from dejaq.core.model import TopicSettings, Webhook
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import BrokerProcess, StartBroker
from tests.e2e.support import EMPTY, counts, dead_includes, now_ms, produce, wait_until
from tests.e2e.webhook_sink import Hit, Reply, Sink, always


@pytest.fixture
def hook_broker(start_broker: StartBroker) -> BrokerProcess:
    return start_broker("memory://", DEJAQ_WEBHOOK_ALLOW="127.0.0.1")


@pytest.fixture
def metered_broker(start_broker: StartBroker) -> tuple[BrokerProcess, str]:
    """A broker as ``hook_broker``, serving /metrics too: it and its metrics address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        metrics = f"127.0.0.1:{s.getsockname()[1]}"
    broker = start_broker("memory://", DEJAQ_WEBHOOK_ALLOW="127.0.0.1", DEJAQ_METRICS=metrics)
    return broker, metrics


def _sample(metrics: str, series: str) -> float:
    text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def webhook_topic(client: Client, name: str, hook: Webhook, **settings: int) -> Webhook:
    """Create ``name`` posting to ``hook``; the webhook as created (its secret included)."""
    topic = await Admin(client).create_topic(name, TopicSettings(webhook=hook, **settings))
    assert topic.settings.webhook is not None
    return topic.settings.webhook


async def test_due_messages_are_posted_at_their_time_signed_and_acked(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    async with Client(hook_broker.address) as client:
        # Given a webhook topic whose secret the broker made
        hook = await webhook_topic(client, topic_name, Webhook(sink.url, headers=(("X-Env", "t"),)))
        assert hook.secret.startswith(signature.SECRET_PREFIX)
        # When messages due over the next second are produced
        base = now_ms() + 300
        sent = [Outgoing(f"p{i}".encode(), base + 40 * i, id=f"m{i}") for i in range(20)]
        await produce(client, topic_name, sent)
        await wait_until(lambda: len(sink.hits) >= 20, 15, "20 requests")
        # Then each came once, at or after its due time, with its payload and headers
        assert sorted(h.id for h in sink.hits) == sorted(m.id or "" for m in sent)
        by_id = {m.id: m for m in sent}
        for hit in sink.hits:
            m = by_id[hit.id]
            assert hit.due_ms == m.timestamp_ms and hit.body == m.payload
            assert hit.arrived_ms >= hit.due_ms, f"{hit.id} arrived early"
            assert hit.delivery == 1 and hit.headers["X-Env"] == "t"
            # And its signature verifies with the topic's secret
            assert signature.verify(hook.secret, hit.signature, hit.body, int(time.time() * 1000))
        # And every 2xx acked its message
        await wait_until(lambda: _counts_are(client, topic_name, EMPTY), 10, "all acked")
        # And no answer but the admin calls' carries the secret
        described = await Admin(client).describe_topic(topic_name)
        assert described.topic.settings.webhook is not None
        assert described.topic.settings.webhook.secret == ""
        assert await Admin(client).webhook_secret(topic_name) == hook.secret


async def test_requests_in_flight_are_bounded_by_the_concurrency(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    # Given an endpoint that takes 50 ms an answer, and a webhook of concurrency 3
    in_flight = [0, 0]  # now, most

    async def answer(hit: Hit, before: int) -> Reply:
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await _sleep_s(0.05)  # the endpoint's own slowness
        in_flight[0] -= 1
        return 200, {}

    sink.answer = answer
    async with Client(hook_broker.address) as client:
        await webhook_topic(client, topic_name, Webhook(sink.url, concurrency=3))
        # When 15 messages are due at once
        await produce(client, topic_name, [Outgoing(b"x", now_ms(), id=f"c{i}") for i in range(15)])
        await wait_until(lambda: len(sink.ok_ids()) == 15, 15, "all answered")
    # Then never more than 3 requests were in flight, and 3 were
    assert in_flight[1] == 3


async def test_messages_waiting_for_a_connection_go_back_when_the_webhook_is_removed(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    # Given a webhook of concurrency 1 whose endpoint never answers, and four messages due
    async def answer(hit: Hit, before: int) -> Reply:
        return await sink.hang()

    sink.answer = answer
    async with Client(hook_broker.address) as client:
        await webhook_topic(client, topic_name, Webhook(sink.url, concurrency=1))
        await produce(client, topic_name, [Outgoing(b"x", now_ms(), id=f"w{i}") for i in range(4)])
        await wait_until(lambda: len(sink.hits) == 1, 15, "the first request")
        # (the broker leased one more, waiting for the connection to be free)
        await wait_until(lambda: _counts_are(client, topic_name, (0, 2, 2, 0)), 10, "two leased")
        # When the webhook is removed
        await Admin(client).set_webhook(topic_name, None)
        # Then the waiting one is due again at once; only the one in flight stays leased
        await wait_until(lambda: _counts_are(client, topic_name, (0, 3, 1, 0)), 10, "handed back")
    assert len(sink.hits) == 1


async def test_any_message_id_travels_percent_encoded(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    odd = ["caf\u00e9 \u2603", "line\r\nX-Injected: 1", "100%", "a/b:c@d"]
    async with Client(hook_broker.address) as client:
        await webhook_topic(client, topic_name, Webhook(sink.url))
        await produce(client, topic_name, [Outgoing(b"x", now_ms(), id=i) for i in odd])
        await wait_until(lambda: sink.ok_ids() == set(odd), 15, "every odd id")
    assert not any("X-Injected" in h.headers for h in sink.hits)
    assert {h.headers["Dejaq-Id"] for h in sink.hits if h.id == "a/b:c@d"} == {"a/b:c@d"}


async def test_a_message_s_key_and_headers_arrive_as_request_headers(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    given = {"Content-Type": "application/json", "X-Region": "z\u00fcrich", "traceparent": own}
    async with Client(hook_broker.address) as client:
        # Given a webhook topic, a keyed message with headers and a plain one
        await webhook_topic(client, topic_name, Webhook(sink.url))
        sent = [
            Outgoing(b"k", now_ms(), id="keyed", key="caf\u00e9 42", headers=given),
            Outgoing(b"p", now_ms(), id="plain"),
        ]
        # When both are due
        await produce(client, topic_name, sent)
        await wait_until(lambda: sink.ok_ids() == {"keyed", "plain"}, 15, "both requests")
    (keyed,) = sink.of("keyed")
    # Then the key and headers came under Dejaq-Key and Dejaq-Header-<name>, percent-encoded
    # where a header value cannot carry them, and the message's traceparent as itself, once
    assert keyed.headers["Dejaq-Key"] == "caf%C3%A9%2042"
    assert unquote(keyed.headers["Dejaq-Key"]) == "caf\u00e9 42"
    assert keyed.headers["Dejaq-Header-Content-Type"] == "application/json"
    assert unquote(keyed.headers["Dejaq-Header-X-Region"]) == "z\u00fcrich"
    assert [v for k, v in keyed.pairs if k.lower() == "traceparent"] == [own]
    assert "Dejaq-Header-traceparent" not in keyed.headers
    # And the plain message's request carried none of them
    (plain,) = sink.of("plain")
    names = {k.lower() for k, _ in plain.pairs}
    assert "dejaq-key" not in names and "traceparent" not in names
    assert not [n for n in names if n.startswith("dejaq-header-")]


async def test_a_failing_endpoint_is_retried_with_backoff_until_it_answers(
    metered_broker: tuple[BrokerProcess, str], sink: Sink, topic_name: str
) -> None:
    # Given an endpoint that answers 500 three times, then 200
    hook_broker, metrics = metered_broker
    sink.answer = lambda hit, before: (500 if before < 3 else 200, {})
    async with Client(hook_broker.address) as client:
        await webhook_topic(client, topic_name, Webhook(sink.url, backoff_ms=100))
        # When a message falls due
        await produce(client, topic_name, [Outgoing(b"x", now_ms() + 100, id="r")])
        # Then it is posted four times, the gaps doubling from the backoff
        await wait_until(lambda: "r" in sink.ok_ids(), 15, "the fourth attempt")
        hits = sink.of("r")
        assert [h.delivery for h in hits] == [1, 2, 3, 4]
        gaps = [b.arrived_ms - a.arrived_ms for a, b in itertools.pairwise(hits)]
        assert all(gap >= want for gap, want in zip(gaps, (100, 200, 400), strict=True)), gaps
        # And the 200 acked it
        await wait_until(lambda: _counts_are(client, topic_name, EMPTY), 10, "acked")

    # And the broker counted the requests by outcome
    def series(outcome: str) -> str:
        labels = f'kind="timeline",outcome="{outcome}",topic="{topic_name}"'
        return f"dejaq_webhook_requests_total{{{labels}}}"

    assert _sample(metrics, series("5xx")) == 3
    assert _sample(metrics, series("2xx")) == 1


async def test_retry_after_is_honoured(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    # Given an endpoint that first answers 429 with Retry-After: 1
    def answer(hit: Hit, before: int) -> Reply:
        return (429, {"Retry-After": "1"}) if before == 0 else (200, {})

    sink.answer = answer
    async with Client(hook_broker.address) as client:
        await webhook_topic(client, topic_name, Webhook(sink.url, backoff_ms=10))
        await produce(client, topic_name, [Outgoing(b"x", now_ms() + 50, id="ra")])
        await wait_until(lambda: "ra" in sink.ok_ids(), 15, "the second attempt")
        # Then the second attempt waited the second asked, not the 10 ms backoff
        first, second = sink.of("ra")
        assert second.arrived_ms - first.arrived_ms >= 1000


async def test_past_max_deliveries_a_message_goes_to_the_dead_timeline(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    # Given an endpoint that always fails and a topic of 3 deliveries at most
    sink.answer = always(503)
    async with Client(hook_broker.address) as client:
        await webhook_topic(client, topic_name, Webhook(sink.url, backoff_ms=20), max_deliveries=3)
        await produce(client, topic_name, [Outgoing(b"x", now_ms() + 50, id="d")])
        # Then after three attempts it is dead, and posted no more
        await wait_until(dead_includes(client, topic_name, "d"), 15, "dead")
        assert [h.delivery for h in sink.of("d")] == [1, 2, 3]


async def test_a_timeout_nacks_and_the_message_is_posted_again(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    # Given an endpoint that answers its first request too late
    async def answer(hit: Hit, before: int) -> Reply:
        if before == 0:
            await _sleep_s(1.0)  # past the 200 ms timeout
        return 200, {}

    sink.answer = answer
    async with Client(hook_broker.address) as client:
        hook = Webhook(sink.url, timeout_ms=200, backoff_ms=50)
        await webhook_topic(client, topic_name, hook)
        await produce(client, topic_name, [Outgoing(b"x", now_ms() + 50, id="t")])
        # Then it is posted again (delivery 2), answered, and acked
        await wait_until(lambda: any(h.delivery == 2 for h in sink.of("t")), 15, "a retry")
        await wait_until(lambda: _counts_are(client, topic_name, EMPTY), 10, "acked")


async def test_a_webhook_set_later_starts_delivery_and_none_stops_it(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    async with Client(hook_broker.address) as client:
        admin = Admin(client)
        # Given a plain topic, then a webhook set on it
        await admin.create_topic(topic_name, TopicSettings())
        topic = await admin.set_webhook(topic_name, Webhook(sink.url))
        assert topic.settings.webhook is not None and topic.settings.webhook.secret
        secret = topic.settings.webhook.secret
        await produce(client, topic_name, [Outgoing(b"a", now_ms() + 50, id="a")])
        await wait_until(lambda: "a" in sink.ok_ids(), 15, "a posted")
        # When its timeout changes, its secret stays; a rotation makes a new one
        changed = dataclasses.replace(topic.settings.webhook, timeout_ms=3000, secret="")
        topic = await admin.set_webhook(topic_name, changed)
        assert topic.settings.webhook is not None and topic.settings.webhook.secret == secret
        rotated = await admin.rotate_webhook_secret(topic_name)
        assert rotated.settings.webhook is not None
        assert rotated.settings.webhook.secret not in ("", secret)
        # And when the webhook is removed, nothing more is posted
        await admin.set_webhook(topic_name, None)
        await produce(client, topic_name, [Outgoing(b"b", now_ms(), id="b")])
        await wait_until(lambda: _counts_are(client, topic_name, (0, 1, 0, 0)), 10, "b due")
        assert sink.of("b") == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/h",
        "http://localhost:9/h",
        "http://10.0.0.7/h",
        "http://192.168.1.1/h",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:9/h",
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",  # NAT64 of the metadata service
    ],
)
async def test_internal_targets_are_refused_without_an_allowlist(
    memory_broker: BrokerProcess, topic_name: str, url: str
) -> None:
    async with Client(memory_broker.address) as client:
        admin = Admin(client)
        # When a topic is created with an internal target, on a broker with no allowlist
        with pytest.raises(InvalidArgument, match="--webhook-allow"):
            await admin.create_topic(topic_name, TopicSettings(webhook=Webhook(url)))
        # Then nothing was created
        with pytest.raises(NotFound):
            await admin.describe_topic(topic_name)
        # And setting one on an existing topic is refused the same way, changing nothing
        await admin.create_topic(topic_name, TopicSettings())
        with pytest.raises(InvalidArgument, match="--webhook-allow"):
            await admin.set_webhook(topic_name, Webhook(url))
        assert (await admin.describe_topic(topic_name)).topic.settings.webhook is None


@pytest.mark.parametrize(
    ("hook", "says"),
    [
        (Webhook("ftp://x.example/h"), "http:// or https://"),
        (Webhook("https://x.example/h", timeout_ms=1), "timeout"),
        (Webhook("https://x.example/h", concurrency=100_000), "concurrency"),
        (Webhook("https://x.example/h", headers=(("Dejaq-Id", "x"),)), "set by the broker"),
        (Webhook("https://x.example/h", headers=(("X-A", "a\r\nB: b"),)), "one line"),
        (Webhook("https://x.example/h", secret="short"), "secret"),
    ],
)
async def test_bad_webhook_settings_are_refused_by_name(
    memory_broker: BrokerProcess, topic_name: str, hook: Webhook, says: str
) -> None:
    async with Client(memory_broker.address) as client:
        with pytest.raises(InvalidArgument, match=says):
            await Admin(client).create_topic(topic_name, TopicSettings(webhook=hook))


async def test_a_priority_topic_cannot_have_a_webhook(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    hook = Webhook("https://x.example/h")
    async with Client(memory_broker.address) as client:
        with pytest.raises(WrongKind, match="webhooks post timelines"):
            await Admin(client).create_topic(
                topic_name, TopicSettings(kind="priority", priorities=10, webhook=hook)
            )
        await Admin(client).create_topic(topic_name, TopicSettings(kind="priority", priorities=10))
        with pytest.raises(WrongKind, match="webhooks post timelines"):
            await Admin(client).set_webhook(topic_name, hook)


async def _counts_are(client: Client, topic: str, want: tuple[int, int, int, int]) -> bool:
    return await counts(client, topic) == want


async def _sleep_s(seconds: float) -> None:
    await asyncio.sleep(seconds)  # the endpoint's own slowness, not a wait for a condition
