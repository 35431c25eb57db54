"""Due batches published to a sink with a window of batches awaiting their
confirms: sent without waiting for the ones before, acked oldest first once
confirmed, and after a failure published again, in order, with every batch
sent after the failed one. The sink here is a stand-in whose confirms the
test gives; the RabbitMQ sink's own are pinned in test_rabbitmq.py."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from dejaq.bridges.endpoints import EndpointDown, Outbound, Sink
from dejaq.bridges.publishing import Publishing


class HeldSink(Sink):
    """A sink whose confirms come when the test says; ``publish`` (the way
    a failed batch goes again) confirms at once."""

    window = 3

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.confirms: list[asyncio.Future[None]] = []
        self.published: list[str] = []
        self.opened = 0

    async def open(self) -> None:
        self.opened += 1

    async def publish(self, messages: Sequence[Outbound]) -> None:
        self.published.extend(m.fields["id"] for m in messages)

    async def send(self, messages: Sequence[Outbound]) -> asyncio.Future[None]:
        self.sent.extend(m.fields["id"] for m in messages)
        confirm: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.confirms.append(confirm)
        return confirm

    async def close(self) -> None:
        """Nothing to close: this sink holds no connection."""


class Story:
    def __init__(self) -> None:
        self.sink = HeldSink()
        self.acked: list[str] = []
        self.failures: list[Exception] = []
        self.publishing: Publishing[str] = Publishing(
            self.sink, self.reopen, self.failures.append, self.ack
        )

    async def reopen(self) -> bool:
        await self.sink.open()
        return True

    async def ack(self, due: Sequence[str]) -> None:
        self.acked.extend(due)

    async def publish(self, *ids: str) -> bool:
        return await self.publishing.publish(list(ids), [Outbound(b"", {"id": i}) for i in ids])


async def test_batches_go_out_before_earlier_confirms_and_are_acked_oldest_first() -> None:
    story = Story()
    # when two batches are published, none confirmed yet
    assert await story.publish("a", "b") and await story.publish("c")
    # then both were sent, and none is acked
    assert story.sink.sent == ["a", "b", "c"] and story.acked == []
    # when the second is confirmed first, then it waits for the first
    story.sink.confirms[1].set_result(None)
    assert await story.publishing.settle(keep=3) and story.acked == []
    # and once the first is confirmed, both are acked, in order
    story.sink.confirms[0].set_result(None)
    assert await story.publishing.settle(keep=3)
    assert story.acked == ["a", "b", "c"] and story.publishing.in_flight == 0


async def test_a_full_window_waits_for_its_oldest_confirm() -> None:
    story = Story()
    assert await story.publish("a") and await story.publish("b")
    # when a third batch fills the window, the publish waits for the oldest confirm
    third = asyncio.create_task(story.publish("c"))
    await asyncio.sleep(0)  # the task runs until it waits
    assert story.sink.sent == ["a", "b", "c"] and not third.done()
    story.sink.confirms[0].set_result(None)
    assert await third
    assert story.acked == ["a"] and story.publishing.in_flight == 2


async def test_a_failed_batch_goes_again_with_every_batch_after_it_in_order() -> None:
    story = Story()
    assert await story.publish("a") and await story.publish("b")
    # when the first fails, though the second was confirmed
    story.sink.confirms[1].set_result(None)
    story.sink.confirms[0].set_exception(EndpointDown("gone"))
    assert await story.publishing.settle(keep=0)
    # then the sink is opened again and both go again, in order, then are acked
    assert story.sink.opened == 1 and story.sink.published == ["a", "b"]
    assert story.acked == ["a", "b"] and [str(f) for f in story.failures] == ["gone"]
    assert story.publishing.in_flight == 0
