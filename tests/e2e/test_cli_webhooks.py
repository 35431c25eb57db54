"""``dejaq topic create|set`` with a webhook, against a broker process and a real sink."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from dejaq.core import signature
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import BrokerProcess, StartBroker
from tests.e2e.support import now_ms, produce, wait_until
from tests.e2e.test_cli import Cli
from tests.e2e.webhook_sink import Sink

SECRET_LINE = re.compile(r"^signing secret (whsec_\S+)$", re.MULTILINE)


async def _ok(cli: Cli, *args: str) -> str:
    # In a thread: the sink answers on this test's event loop meanwhile.
    return await asyncio.to_thread(cli.ok, *args)


async def test_a_webhook_topic_from_the_command_line(
    start_broker: StartBroker, sink: Sink, topic_name: str
) -> None:
    broker = start_broker("memory://", DEJAQ_WEBHOOK_ALLOW="127.0.0.1")
    cli = Cli(broker.address)
    # Given a topic created with a webhook, its headers and a secret the broker made
    out = await _ok(
        cli,
        *("topic", "create", topic_name, "--deliver-to", sink.url, "--deliver-timeout", "2s"),
        *("--deliver-concurrency", "4", "--deliver-header", "X-Env=prod"),
        *("--deliver-header", "X-Two=a=b"),
    )
    assert f"delivering to {sink.url}" in out
    match = SECRET_LINE.search(out)
    assert match, out
    secret = match.group(1)
    # Then describe shows the webhook but never its secret
    described = await _ok(cli, "topic", "describe", topic_name)
    assert f"webhook    {sink.url}  timeout_ms=2000  concurrency=4" in described
    assert secret not in described and secret not in await _ok(cli, "topic", "list", "--json")
    # And a due message is posted with the headers, signed with that secret
    async with Client(broker.address) as client:
        await produce(client, topic_name, [Outgoing(b"hello", now_ms() + 50, id="c1")])
    await wait_until(lambda: "c1" in sink.ok_ids(), 15, "the request")
    (hit,) = sink.of("c1")
    assert hit.headers["X-Env"] == "prod" and hit.headers["X-Two"] == "a=b"
    assert signature.verify(secret, hit.signature, b"hello", int(time.time() * 1000))
    # When the timeout is set, the secret stays; a rotation prints a new one
    await _ok(cli, "topic", "set", topic_name, "--deliver-timeout", "3s")
    shown = SECRET_LINE.search(await _ok(cli, "topic", "set", topic_name, "--show-secret"))
    assert shown and shown.group(1) == secret
    rotated = SECRET_LINE.search(await _ok(cli, "topic", "set", topic_name, "--rotate-secret"))
    assert rotated and rotated.group(1) != secret
    # And --deliver-to none stops webhook delivery
    assert "no webhook" in await _ok(cli, "topic", "set", topic_name, "--deliver-to", "none")
    assert "\nwebhook " not in await _ok(cli, "topic", "describe", topic_name)


async def test_a_loopback_target_is_refused_readably(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    cli = Cli(memory_broker.address)
    error = await asyncio.to_thread(
        cli.fails, "topic", "create", topic_name, "--deliver-to", "http://127.0.0.1:1/h"
    )
    assert "resolves to 127.0.0.1" in error and "--webhook-allow" in error
    flags_alone = await asyncio.to_thread(
        cli.fails, "topic", "create", topic_name, "--deliver-timeout", "2s"
    )
    assert "need --deliver-to" in flags_alone


async def test_a_webhook_topic_with_a_secret_of_ones_own(
    tmp_path: Path, sink: Sink, topic_name: str
) -> None:
    # Given a broker with its HTTP API on, as the webhooks page runs it
    allow = {"DEJAQ_WEBHOOK_ALLOW": "127.0.0.1"}
    broker = BrokerProcess("memory://", tmp_path / "broker.log", allow, ["--http", "127.0.0.1:0"])
    broker.start()
    try:
        cli = Cli(broker.address)
        # When a topic is created with a webhook and the secret given
        out = await _ok(
            cli, "topic", "create", topic_name, "--deliver-to", sink.url,
            "--deliver-secret", "whsec_our-own-secret-0001",
        )  # fmt: skip
        # Then it is created, the secret is not echoed, and deliveries are signed with it
        assert f"delivering to {sink.url}" in out and "whsec_our-own-secret-0001" not in out
        async with Client(broker.address) as client:
            await produce(client, topic_name, [Outgoing(b"hi", now_ms() + 50, id="s1")])
        await wait_until(lambda: "s1" in sink.ok_ids(), 15, "the request")
        (hit,) = sink.of("s1")
        assert signature.verify(
            "whsec_our-own-secret-0001", hit.signature, b"hi", int(time.time() * 1000)
        )
    finally:
        broker.stop()
