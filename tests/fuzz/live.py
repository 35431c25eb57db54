"""A live broker for the fuzz stories, the state a call must not change, and a
client on the side that must keep being served.

``LiveBroker`` is one ``dejaq broker`` process per test module and storage
kind, with three topics the fuzzing aims at (unary calls, Produce, Consume),
each holding a few messages: waiting ones far in the future, and one leased
by ``holder``, a raw Consume stream with a single credit that never settles
(so nothing else is ever leased there behind a test's back).

``Heartbeat`` is another client, in a thread of its own: through the public
driver it produces a message due now every few milliseconds on a topic of its
own and consumes and acks it. A test asserts that it kept receiving while
the fuzzing ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf.message import Message

from dejaq.broker.api import validation
from dejaq.core.clock import now_ms
from dejaq.core.model import TopicSettings
from dejaq.core.wire.batches import encode_messages
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Producer
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc
from tests.e2e.broker_process import BrokerProcess, storage_url
from tests.fuzz.strategies import Known

Code = grpc.StatusCode
# Every status a broker may answer to bad input. UNKNOWN and INTERNAL mean an
# exception escaped our own checks; UNAVAILABLE would mean the broker failed.
CLEAR = frozenset(
    {
        Code.OK,
        Code.INVALID_ARGUMENT,
        Code.NOT_FOUND,
        Code.ALREADY_EXISTS,
        Code.FAILED_PRECONDITION,
        Code.ABORTED,
        Code.OUT_OF_RANGE,
    }
)
CALL_TIMEOUT_S = 10.0  # a hang guard: an answer later than this is a hang
BUCKETS = 4
YEAR_2100_MS = 4_102_444_800_000
WAITING = ["w0", "w1", "w2"]
HELD = "h0"
HOLDER = "holder"
MISSING = "no-such-topic"

Snapshot = tuple[frozenset[str], tuple[tuple[object, ...], ...]]


@dataclass
class Heartbeat:
    """A producer and a consumer on a topic of their own, in a thread of their own."""

    address: str
    topic: str = field(default_factory=lambda: f"heartbeat-{uuid.uuid4().hex[:8]}")
    received: int = 0
    max_gap_s: float = 0.0
    error: BaseException | None = None
    _last: float = field(default_factory=time.monotonic)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(CALL_TIMEOUT_S * 2):
            raise AssertionError(f"the heartbeat did not start: {self.error!r}")
        return self

    def _run(self, ready: threading.Event) -> None:
        try:
            asyncio.run(self._beat(ready))
        except BaseException as exc:  # reported by assert_serving
            self.error = exc
            ready.set()

    async def _beat(self, ready: threading.Event) -> None:
        async with Client(self.address, timeout_s=CALL_TIMEOUT_S) as client:
            await Admin(client).create_topic(self.topic, TopicSettings(buckets=2))
            async with (
                Producer(client, self.topic) as producer,
                Consumer(client, self.topic, credits=8) as consumer,
            ):
                sender = asyncio.create_task(self._send(producer))
                ready.set()
                try:
                    async for delivery in consumer:
                        await delivery.ack()
                        now = time.monotonic()
                        self.max_gap_s = max(self.max_gap_s, now - self._last)
                        self._last = now
                        self.received += 1
                        if self._stop.is_set():
                            break
                finally:
                    sender.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sender

    async def _send(self, producer: Producer) -> None:
        try:
            while True:
                await producer.send(b"beat")  # due now
                await asyncio.sleep(0.02)
        except Exception as exc:  # reported by assert_serving
            self.error = exc

    def assert_serving(self) -> None:
        """It received at least a few more messages, and never waited long for one."""
        start = self.received
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while self.received < start + 3 and self.error is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"the heartbeat consumer got nothing for {CALL_TIMEOUT_S} s")
            time.sleep(0.02)  # polling a condition under a deadline
        assert self.error is None, f"the heartbeat client failed: {self.error!r}"
        assert self.max_gap_s < CALL_TIMEOUT_S, f"heartbeat stalled {self.max_gap_s:.1f} s"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(CALL_TIMEOUT_S)


class LiveBroker:
    """A broker process, a raw stub on it, the fuzzing's topics and the heartbeat."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        self.process = BrokerProcess(storage_url(kind, folder), folder / "broker.log").start()
        self.channel = grpc.insecure_channel(self.process.address)
        self.stub = pb_grpc.TimelineStub(self.channel)
        tag = uuid.uuid4().hex[:6]
        self.unary_topic = f"fuzz-unary-{tag}"
        self.produce_topic = f"fuzz-produce-{tag}"
        self.consume_topic = f"fuzz-consume-{tag}"
        self.doomed_topic = f"fuzz-doomed-{tag}"  # the one DeleteTopic may hit
        self._holder: grpc.Future | None = None
        self._holder_frames: list[pb.ConsumeRequest] = []
        self._holder_release = threading.Event()
        self.heartbeat = Heartbeat(self.process.address)

    def start(self) -> LiveBroker:
        for name in (self.unary_topic, self.produce_topic, self.consume_topic, self.doomed_topic):
            settings = pb.TopicSettings(buckets=BUCKETS, max_payload_bytes=16, lease_ms=60_000)
            self.stub.CreateTopic(pb.CreateTopicRequest(name=name, settings=settings))
        for topic in (self.unary_topic, self.produce_topic, self.consume_topic):
            self.produce(topic, WAITING, [YEAR_2100_MS] * len(WAITING))
        self.produce(self.consume_topic, ["c0", "c1", "c2"], [0, 0, 0])
        self.produce(self.unary_topic, [HELD], [now_ms()])
        self._hold()
        self.heartbeat.start()
        return self

    def produce(self, topic: str, ids: list[str], at: list[int]) -> None:
        batch = encode_messages(at, [b"p"] * len(ids), ids)
        (answer,) = self.stub.Produce(iter([pb.ProduceRequest(topic=topic, batch=batch)]))
        assert not answer.rejections, answer.rejections

    def _hold(self) -> None:
        """``holder`` takes HELD and keeps it, with no credit left for anything else."""
        hello = pb.Hello(
            topic=self.unary_topic,
            consumer_id=HOLDER,
            lease_ms=validation.MAX_LEASE_MS,
            credits=1,
        )

        def frames() -> Iterator[pb.ConsumeRequest]:
            yield pb.ConsumeRequest(hello=hello)
            self._holder_release.wait()
            yield pb.ConsumeRequest(goodbye=pb.Goodbye())

        responses = self.stub.Consume(frames())
        welcome, deliveries = next(responses), next(responses)
        assert welcome.HasField("welcome") and deliveries.HasField("deliveries")
        self._holder = responses

    def aim(self, method: str) -> str:
        """The topic a call of ``method`` aims at: calls on a whole topic (create,
        delete, update, cron entries, whose firings change it later) get the
        doomed one, every other call the one the snapshots watch."""
        topic_wide = method in ("CreateTopic", "DeleteTopic", "UpdateTopic")
        return self.doomed_topic if topic_wide or method.startswith("Cron") else self.unary_topic

    def known(self, *topics: str) -> Known:
        return Known([*topics, MISSING], [*WAITING, HELD, "c0"], [HOLDER])

    def call(self, method: str, request: Message) -> tuple[grpc.StatusCode, str]:
        """A unary call's status code and detail."""
        try:
            getattr(self.stub, method)(request, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
        return Code.OK, ""

    def snapshot(self, topic: str) -> Snapshot:
        """The topic names, and every message of ``topic`` as stored (not its
        state by the clock, which moves by itself)."""
        names = frozenset(t.name for t in self.stub.ListTopics(pb.ListTopicsRequest()).topics)
        rows: list[tuple[object, ...]] = []
        if topic in names:
            for bucket in range(BUCKETS):
                page = self.stub.ScanBucket(
                    pb.ScanBucketRequest(topic=topic, bucket=bucket, limit=10_000)
                )
                assert page.done, "the fuzz topics stay small"
                rows += [
                    (
                        m.id,
                        m.timestamp_ms,
                        m.payload,
                        m.version,
                        m.deliveries,
                        m.lease_owner,
                        m.state == "dead",
                        m.max_deliveries,
                        m.expires_at_ms,
                    )
                    for m in page.messages
                ]
        return names, tuple(sorted(rows, key=repr))

    def close(self) -> int | None:
        self.heartbeat.stop()
        self._holder_release.set()
        if self._holder is not None:
            with contextlib.suppress(grpc.RpcError):
                list(self._holder)
        self.channel.close()
        return self.process.stop()
