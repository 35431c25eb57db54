"""A thin synchronous wrapper over the asyncio driver.

One background thread runs an event loop; every call is submitted to it and
waited for. The objects behave like their async counterparts with plain calls::

    with SyncClient("127.0.0.1:7700") as client:
        client.admin.create_topic("jobs")
        client.producer("jobs").send(b"hello", delay_ms=1000)
        consumer = client.consumer("jobs")
        for delivery in consumer:
            delivery.ack()
            break
        consumer.close()
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer, Delivery
from dejaq.driver.producer import Producer

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


class SyncConsumer(_Proxy):
    def __iter__(self) -> Iterator[_Proxy]:
        it = aiter(self._target)
        while True:
            try:
                delivery: Delivery = self._loop.run(anext(it))
            except StopAsyncIteration:
                return
            yield _Proxy(self._loop, delivery)

    def receive(self, timeout: float | None = None) -> _Proxy:
        """The next delivery; ``TimeoutError`` if none arrives in ``timeout`` seconds."""

        async def next_one() -> Delivery:
            return await asyncio.wait_for(anext(aiter(self._target)), timeout)

        return _Proxy(self._loop, self._loop.run(next_one()))


class SyncClient:
    def __init__(self, brokers: str | None = None, timeout_s: float = 30.0) -> None:
        self._loop = _Loop()

        async def make() -> Client:
            return Client(brokers, timeout_s)

        self._client = self._loop.run(make())
        self.admin = _Proxy(self._loop, Admin(self._client))

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
