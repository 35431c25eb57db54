"""A thin synchronous wrapper over the asyncio driver.

One background thread runs an event loop; every call is submitted to it and
waited for. The objects behave like their async counterparts with plain calls::

    with SyncClient("127.0.0.1:7700") as client:
        client.create_topic("jobs", exist_ok=True)
        client.producer("jobs").send(b"hello", delay_ms=1000)
        consumer = client.consumer("jobs")
        for delivery in consumer:
            delivery.ack()      # queued, grouped: returns at once
            break
        consumer.flush()        # waits for the broker's answers, raises refusals
        consumer.close()
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import SETTLED_LOOK_S, Consumer
from dejaq.driver.cron import Cron
from dejaq.driver.delivery import Delivery
from dejaq.driver.producer import Producer
from dejaq.driver.sync_admin import SyncAdmin
from dejaq.driver.tls import ClientTls

T = TypeVar("T")


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="dejaq-sync", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class _Proxy:
    """Calls the wrapped object's coroutine methods on the loop and waits."""

    def __init__(self, loop: _Loop, target: Any) -> None:
        self._loop = loop
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if asyncio.iscoroutine(result):
                return self._loop.run(result)
            return result

        return call


class SyncDelivery:
    """A delivery for synchronous code. ``ack`` and ``nack`` queue the settle on
    the driver's loop and return at once (``confirm=True`` waits for the
    broker's answer and raises a refusal); ``extend`` always waits."""

    def __init__(self, loop: _Loop, delivery: Delivery) -> None:
        self._loop = loop
        self._delivery = delivery

    def __getattr__(self, name: str) -> Any:
        return getattr(self._delivery, name)

    def __repr__(self) -> str:
        return repr(self._delivery)

    def ack(self, *, confirm: bool = False) -> None:
        delivery = self._delivery

        async def ack() -> None:  # on the loop's thread: an ack queues as it is called
            await delivery.ack(confirm=confirm)

        self._settle(ack(), confirm)

    def nack(self, delay_ms: int = 0, *, confirm: bool = False) -> None:
        delivery = self._delivery

        async def nack() -> None:
            await delivery.nack(delay_ms, confirm=confirm)

        self._settle(nack(), confirm)

    def extend(self, lease_ms: int) -> None:
        self._loop.run(self._delivery.extend(lease_ms))

    def _settle(self, coro: Coroutine[Any, Any, None], confirm: bool) -> None:
        if confirm:
            self._loop.run(coro)
        else:
            # Refusals reach the consumer's on_settle_error and its next flush().
            asyncio.run_coroutine_threadsafe(coro, self._loop.loop)


class SyncConsumer(_Proxy):
    """Iterate for deliveries; each trip to the driver's loop takes every delivery
    already buffered, so a plain ``for d in consumer: d.ack()`` loop is not one
    thread hop per message."""

    def __init__(self, loop: _Loop, target: Consumer) -> None:
        super().__init__(loop, target)
        self._ready: deque[Delivery] = deque()
        self._closing = False
        # The delivery each thread took last, until it asks for the next one:
        # it is processing it (close() lets it finish).
        self._in_hand: dict[int, Delivery] = {}
        self._came_back = threading.Condition()

    def close(self) -> None:
        """Leave cleanly, as ``Consumer.close``: deliveries other threads took and
        have not settled, until they ask for the next one, are waited for (up to
        the consumer's ``close_timeout_s``) and never released while processed."""
        consumer: Consumer = self._target
        self._closing = True
        timeout = consumer.close_timeout_s
        deadline = time.monotonic() + (consumer.client.timeout_s if timeout is None else timeout)
        me = threading.get_ident()
        with self._came_back:
            while True:
                busy = [d for t, d in self._in_hand.items() if t != me and not d._settled]
                left = deadline - time.monotonic()
                if not busy or left <= 0:
                    break
                # Woken when a thread comes back; a settle alone is seen at the next look.
                self._came_back.wait(min(left, SETTLED_LOOK_S))
        self._loop.run(consumer.close(processing=busy))

    def __iter__(self) -> Iterator[SyncDelivery]:
        while True:
            try:
                yield self.receive()
            except StopIteration:
                return

    def receive(self, timeout: float | None = None) -> SyncDelivery:
        """The next delivery; ``TimeoutError`` if none arrives in ``timeout`` seconds,
        ``StopIteration`` once the consumer is closed (or closing)."""
        me = threading.get_ident()
        with self._came_back:
            if self._in_hand.pop(me, None) is not None:
                self._came_back.notify_all()
        if self._closing:
            raise StopIteration
        if not self._ready:
            consumer: Consumer = self._target

            async def take() -> list[Delivery]:
                got = consumer.ready()
                if got:
                    return got
                first = await asyncio.wait_for(consumer.receive(), timeout)
                return [] if first is None else [first, *consumer.ready()]

            self._ready.extend(self._loop.run(take()))
            if not self._ready:
                raise StopIteration
        d = self._ready.popleft()
        with self._came_back:
            self._in_hand[me] = d
        return SyncDelivery(self._loop, d)


class SyncClient(SyncAdmin):
    """The driver for synchronous code: ``Admin``'s calls are its own methods
    (``create_topic``, ``describe_topic``, ... ; ``admin`` is the client
    itself), and ``producer(topic, **options)`` and ``consumer(topic,
    **options)`` take the options of ``Producer`` and ``Consumer``; calls run
    on one background event loop and wait.

    Options:
        brokers: ``"h1:7700,h2:7700"`` (default ``DEJAQ_BROKER`` or 127.0.0.1:7700).
        timeout_s: per-call deadline (default 30 s).
        tls, token: TLS settings and a bearer token, as for ``Client``
            (default ``DEJAQ_TLS_*`` and ``DEJAQ_TOKEN``).
    """

    def __init__(
        self,
        brokers: str | None = None,
        timeout_s: float = 30.0,
        *,
        tls: ClientTls | bool | None = None,
        token: str | None = None,
    ) -> None:
        self._loop = _Loop()

        async def make() -> Client:
            return Client(brokers, timeout_s, tls=tls, token=token)

        try:
            self._client = self._loop.run(make())
        except BaseException:
            self._loop.stop()  # no thread left behind by a refused setting
            raise
        super().__init__(self._loop, Admin(self._client))
        self.cron = _Proxy(self._loop, Cron(self._client))

    @property
    def admin(self) -> SyncAdmin:
        """The admin calls (the client's own methods)."""
        return self

    def producer(self, topic: str, **options: Any) -> _Proxy:
        async def make() -> Producer:
            return Producer(self._client, topic, **options)

        return _Proxy(self._loop, self._loop.run(make()))

    def consumer(self, topic: str, **options: Any) -> SyncConsumer:
        async def make() -> Consumer:
            return await Consumer(self._client, topic, **options).start()

        return SyncConsumer(self._loop, self._loop.run(make()))

    def close(self) -> None:
        self._loop.run(self._client.close())
        self._loop.stop()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
