"""A refused request is freed when its call ends, by reference counting alone.

gRPC keeps the exception that ended a call with the call's state; its traceback
keeps the frames it passed through, and their locals. A request still named
there stays in memory until a cyclic collection, which a broker (``gc.freeze()``
at start-up, few allocations when idle) runs rarely: refused frames grew a
broker by their size, frame after frame. Here the broker's service runs
in-process on loopback with the cyclic collector off, a client process makes
refused calls, and what this process allocated must be given back once each
call has ended.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator

import grpc
import pytest

from dejaq.broker.api import control
from dejaq.broker.api.requests import add_to_server
from dejaq.broker.api.service import TimelineService
from dejaq.broker.api.topics import TopicCache
from dejaq.broker.assembly import server_options
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import LocalCoordinator
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins.memory import MemoryStorage
from tests.broker import refused_calls

pytestmark = pytest.mark.timeout(60)

CALLS = 3  # refused calls of each kind, of 4 MiB each
# What may stay allocated after them: well under one request.
ALLOWED = refused_calls.SIZE // 4
RELEASE_WAIT_S = 5.0  # a call's last steps run after its client has the status
POLL_S = 0.02


async def poll_until(condition: Callable[[], bool], timeout_s: float = RELEASE_WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True


@pytest.fixture
async def address() -> AsyncIterator[str]:
    """The broker's service over ``memory://``, in this process, on loopback."""
    storage = MemoryStorage("memory://")
    await storage.open()
    config = BrokerConfig()
    broker = BrokerContext(config, storage, LocalCoordinator(), TopicCache(storage))
    await control.create_topic(broker, pb.CreateTopicRequest(name=refused_calls.TOPIC))
    server = grpc.aio.server(options=server_options(config))
    add_to_server(TimelineService(broker), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)
        await storage.close()


@pytest.fixture
def no_cyclic_collection() -> Iterator[None]:
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()
        gc.enable()


async def refused(address: str, kind: str, count: int) -> list[str]:
    """Run the client process; the status codes of its calls."""
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.broker.refused_calls",
        address,
        kind,
        str(count),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await client.communicate()
    assert client.returncode == 0
    return out.decode().split()


def held() -> int:
    return tracemalloc.get_traced_memory()[0]


@pytest.mark.parametrize(
    ("kind", "refusal"),
    [
        ("produce-not-found", "NOT_FOUND"),
        ("produce-malformed", "INVALID_ARGUMENT"),
        ("unary-not-found", "NOT_FOUND"),
        ("settle-invalid", "INVALID_ARGUMENT"),
    ],
)
@pytest.mark.usefixtures("no_cyclic_collection")
async def test_a_refused_request_is_freed_without_a_cyclic_collection(
    address: str, kind: str, refusal: str
) -> None:
    # Given a broker whose cyclic collector does not run
    before = held()
    # When requests of 4 MiB are refused, one call each
    assert await refused(address, kind, CALLS) == [refusal] * CALLS
    # Then what the broker allocated for them is given back as the calls end
    assert await poll_until(lambda: held() - before < ALLOWED), (
        f"{(held() - before) >> 10} KiB still held after {CALLS} refused calls"
    )
