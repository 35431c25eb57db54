"""What the tests of a bridge's ends against a real server share (the NATS
JetStream and the RabbitMQ ends): a call made again until its answer will do,
through a server that is down meanwhile, or until it says the server is down;
a source read until it has handed over so many messages, each under a
deadline; a source's story across a reopen, and both ends' across a kill of
their server."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import pytest

from dejaq.bridges.endpoints import EndpointDown, Inbound, Outbound, Sink, Source

DEADLINE_S = 20.0
T = TypeVar("T")


async def until(what: Callable[[], Awaitable[T]], done: Callable[[T], bool]) -> T:
    """``what()`` again until ``done`` says yes, under a deadline; an
    ``EndpointDown`` on the way is tried again, and raised past the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    last: object = None
    while True:
        try:
            value = await what()
            if done(value):
                return value
            last = value
        except EndpointDown:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            pytest.fail(f"not done within {DEADLINE_S} s: last {last!r}")


async def until_down(what: Callable[[], Awaitable[object]]) -> EndpointDown:
    """``what()`` again until it raises ``EndpointDown``, under a deadline: an
    end sees a killed server."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            await what()
        except EndpointDown as down:
            return down
        if time.monotonic() > deadline:
            pytest.fail(f"no EndpointDown within {DEADLINE_S} s")


async def read_all(source: Source, count: int) -> list[Inbound]:
    """What ``source`` reads until it has handed over ``count`` messages."""
    got: list[Inbound] = []

    async def more() -> list[Inbound]:
        got.extend(await source.read(count - len(got), 200))
        return got

    return await until(more, lambda messages: len(messages) >= count)


async def read_again_after_a_reopen(source: Source) -> None:
    """A source of two messages, ``acked`` and ``forgotten``, reads both and
    acknowledges the first; closed and opened again, it reads the second again,
    with the same source id."""
    await source.open()
    first, second = await read_all(source, 2)
    await source.ack([first])
    await source.close()
    await source.open()
    (again,) = await read_all(source, 1)
    assert (again.payload, again.source_id) == (b"forgotten", second.source_id)
    await source.close()


class Killable(Protocol):
    """A test's server that a kill -9 stops and ``start`` brings back on the
    same port and store."""

    def kill(self) -> None: ...

    def start(self) -> object: ...


async def through_a_kill(server: Killable, source: Source, sink: Sink) -> tuple[Inbound, Inbound]:
    """Both ends across a kill of their server: the source reads the one
    message waiting and leaves it unacknowledged; the server is killed, and
    both ends say it is down; it comes back, both open again, the source reads
    that message again and acknowledges it, and the sink publishes. The
    message as read before the kill and after."""
    await source.open()
    await sink.open()
    (before,) = await read_all(source, 1)
    server.kill()
    await until_down(lambda: source.read(1, 100))
    with pytest.raises(EndpointDown):
        await sink.publish([Outbound(b"x", {"id": "x"})])
    server.start()
    await until(source.open, lambda _: True)
    await until(sink.open, lambda _: True)
    (again,) = await read_all(source, 1)
    await source.ack([again])
    await sink.publish([Outbound(b"after", {"id": "after"})])
    return before, again
