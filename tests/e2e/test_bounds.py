"""Resource bounds on a real broker process: large payloads through the CLI and
back out in frames gRPC accepts, a message too large for any frame, the stream
limit, and a frozen consumer found by keepalive."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from dejaq.core.errors import InvalidArgument, ResourceExhausted
from dejaq.core.wire.frames import MAX_MESSAGE_PAYLOAD
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc
from tests.e2e.broker_process import BrokerProcess, StartBroker
from tests.e2e.support import (
    ChildConsumer,
    assert_serves,
    consuming,
    counts,
    create_topic,
    now_ms,
    wait_until,
)
from tests.e2e.test_cli import DEJAQ

pytestmark = pytest.mark.timeout(120)
BIG = 900_000


def _cli(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DEJAQ_BROKER"}
    return subprocess.run(
        [*DEJAQ, *args, "--broker", address], capture_output=True, text=True, env=env, timeout=90
    )


async def test_the_cli_produces_100_messages_of_900_kb_and_they_come_back(
    memory_broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # Given 100 lines of 900 KB each (90 MB: more than one gRPC frame may carry)
    async with Client(memory_broker.address) as client:
        await create_topic(client, topic_name)
        lines = tmp_path / "big.jsonl"
        due = now_ms()
        with lines.open("w") as f:
            for i in range(100):
                payload = chr(ord("a") + i % 26) * BIG
                f.write(json.dumps({"id": f"m{i}", "timestamp_ms": due, "payload": payload}) + "\n")
        # When the CLI produces them
        done = await asyncio.to_thread(
            _cli, memory_broker.address, "produce", topic_name, "--jsonl", str(lines)
        )
        # Then all are accepted
        assert done.returncode == 0, done.stderr
        assert "accepted 100, duplicate 0, rejected 0" in done.stdout
        assert await counts(client, topic_name) == (0, 100, 0, 0)
        # and a consumer with credit for all of them gets them, in frames under the cap.
        async with consuming(client, topic_name, credits=100) as inbox:
            got = await inbox.take(100, timeout_s=60)
        assert sorted(d.id for d in got) == sorted(f"m{i}" for i in range(100))
        assert all(len(d.payload) == BIG for d in got)


async def test_a_message_too_large_for_any_frame_gets_a_clear_error(
    memory_broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    async with Client(memory_broker.address) as client:
        await create_topic(client, topic_name)
        # The driver refuses it before sending anything
        huge = b"z" * (MAX_MESSAGE_PAYLOAD + 1)
        async with Producer(client, topic_name) as producer:
            with pytest.raises(InvalidArgument, match="does not fit any frame"):
                await producer.send_batch(
                    [Outgoing(b"ok", now_ms(), "a"), Outgoing(huge, now_ms(), "b")]
                )
        assert await counts(client, topic_name) == (0, 0, 0, 0)
        # and the CLI names the line, sending the others.
        lines = tmp_path / "huge.jsonl"
        with lines.open("w") as f:
            f.write(json.dumps({"id": "small", "timestamp_ms": now_ms(), "payload": "x"}) + "\n")
            f.write(
                json.dumps(
                    {
                        "id": "huge",
                        "timestamp_ms": now_ms(),
                        "payload": "z" * (MAX_MESSAGE_PAYLOAD + 1),
                    }
                )
                + "\n"
            )
        done = await asyncio.to_thread(
            _cli, memory_broker.address, "produce", topic_name, "--jsonl", str(lines)
        )
        assert done.returncode == 1
        assert "Traceback" not in done.stderr
        assert "line 2: rejected: a payload of" in done.stderr
        assert "does not fit any frame" in done.stderr
        assert "accepted 1, duplicate 0, rejected 1" in done.stdout


@contextlib.asynccontextmanager
async def _the_one_stream_open(start_broker: StartBroker, topic: str) -> AsyncIterator[str]:
    """A broker serving at most one stream, that one open (a consumer of
    ``topic``); yields the broker's address."""
    broker = start_broker("memory://", DEJAQ_MAX_STREAMS="1")
    async with Client(broker.address) as client:
        await create_topic(client, topic)
        async with consuming(client, topic):
            await wait_until(lambda: _consumers(client, topic, 1), timeout_s=10)
            yield broker.address


async def test_streams_past_max_streams_are_refused(
    start_broker: StartBroker, topic_name: str
) -> None:
    # Given one open stream (a consumer)
    async with _the_one_stream_open(start_broker, topic_name) as address:
        # a second one is refused with RESOURCE_EXHAUSTED
        async with Client(address) as other, Producer(other, topic_name) as producer:
            with pytest.raises(ResourceExhausted, match="at most 1 streams"):
                await producer.send_batch([Outgoing(b"x", now_ms(), "a")])


async def test_a_stream_past_max_streams_is_refused_after_its_opening_frame(
    start_broker: StartBroker, topic_name: str
) -> None:
    # Given the one stream the broker serves, open
    async with (
        _the_one_stream_open(start_broker, topic_name) as address,
        grpc.aio.insecure_channel(address) as channel,
    ):
        # When a second stream opens and has not written its opening frame
        call = pb_grpc.TimelineStub(channel).Produce()
        await asyncio.sleep(0.3)
        # Then it is not refused yet: a refusal landing while the client
        # writes that frame would reach it as grpc's own INTERNAL
        assert not call.done()
        # and once the frame is written, the refusal comes as sent
        await call.write(pb.ProduceRequest(topic=topic_name, batch=b""))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call.read()
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "at most 1 streams" in (refused.value.details() or "")


async def _consumers(client: Client, topic: str, n: int) -> bool:
    return (await Admin(client).describe_topic(topic)).consumers == n


async def test_a_frozen_consumer_is_found_by_keepalive_in_seconds(
    start_broker: StartBroker, topic_name: str
) -> None:
    broker = start_broker("memory://", DEJAQ_KEEPALIVE_MS="500", DEJAQ_KEEPALIVE_TIMEOUT_MS="1000")
    async with Client(broker.address) as client:
        await create_topic(client, topic_name)
        await Producer(client, topic_name).send_batch([Outgoing(b"x", now_ms(), "m")])
        # Given a consumer process holding a message
        child = await ChildConsumer.start(broker.address, topic_name, 1, lease_ms=600_000)
        try:
            assert await _consumers(client, topic_name, 1)
            # When it freezes (SIGSTOP: its socket stays open, nothing answers)
            child.process.send_signal(signal.SIGSTOP)
            frozen = time.monotonic()
            # Then the broker closes its stream within a few seconds
            await wait_until(lambda: _consumers(client, topic_name, 0), timeout_s=15)
            print(f"\nfrozen consumer dropped after {time.monotonic() - frozen:.1f} s")
        finally:
            child.process.send_signal(signal.SIGCONT)
            await child.kill()


async def test_a_consumer_that_sends_but_never_reads_is_cut_off(
    start_broker: StartBroker, topic_name: str
) -> None:
    broker = start_broker("memory://", DEJAQ_MAX_OUTBOX_FRAMES="4")
    async with Client(broker.address) as client:
        await create_topic(client, topic_name)
        async with grpc.aio.insecure_channel(broker.address) as channel:
            stub = pb_grpc.TimelineStub(channel)
            call = stub.Consume()
            hello = pb.Hello(topic=topic_name, consumer_id="deaf", credits=1)
            await call.write(pb.ConsumeRequest(hello=hello))
            # Given a consumer that sends settles (each answered with 200 refusals)
            # and reads nothing,
            ids = [f"no-such-message-{i}" for i in range(200)]
            settle = pb.Settle(kind=pb.Settle.ACK, ids=ids, versions=[1] * len(ids))
            for token in range(2000):
                settle.token = token
                write = asyncio.ensure_future(call.write(pb.ConsumeRequest(settle=settle)))
                await asyncio.wait({write}, timeout=5)
                if not write.done() or write.exception() is not None:
                    break  # the broker no longer reads: it ended the call
            # then the broker lets it go while it still has not read a thing,
            await wait_until(lambda: _consumers(client, topic_name, 0), timeout_s=10)
            # and when it reads at last, its stream ends with RESOURCE_EXHAUSTED.
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                async with asyncio.timeout(30):
                    async for _ in call:
                        pass
            assert ended.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "not reading its stream" in (ended.value.details() or "")
            write.cancel()
        # The broker serves on.
        await assert_serves(broker.address)


async def test_a_produce_frame_past_the_broker_cap_is_refused_and_stores_nothing(
    start_broker: StartBroker, topic_name: str
) -> None:
    broker = start_broker("memory://", DEJAQ_MAX_PRODUCE_MESSAGES="10")
    async with Client(broker.address) as client:
        await create_topic(client, topic_name)
        batch = [Outgoing(b"x", now_ms() + 60_000, f"m{i}") for i in range(20)]
        # A producer whose frames carry 20 messages is refused, nothing stored;
        async with Producer(client, topic_name, max_batch=20) as producer:
            with pytest.raises(InvalidArgument, match="at most 10 messages"):
                await producer.send_batch(batch)
        assert await counts(client, topic_name) == (0, 0, 0, 0)
        # one that cuts at the cap sends the same in two frames.
        async with Producer(client, topic_name, max_batch=10) as producer:
            results = await producer.send_batch(batch)
        assert all(r.accepted for r in results)
        assert await counts(client, topic_name) == (20, 0, 0, 0)
