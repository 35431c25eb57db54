"""A broker started in this event loop with ``--http``, and a client session.

``serve(**settings)`` starts one (memory storage, loopback) and gives an
``Api``: the HTTP base URL, a session, and the broker's gRPC address for the
stories that check both surfaces agree.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from dejaq.broker import assembly
from dejaq.broker.config import BrokerConfig


@dataclass
class Answer:
    status: int
    content_type: str
    body: Any
    headers: Any


@dataclass
class Api:
    url: str
    grpc_address: str
    session: aiohttp.ClientSession
    broker: assembly.RunningBroker

    async def call(
        self, method: str, path: str, body: Any = None, *, raw: bytes | None = None, **kw: Any
    ) -> Answer:
        data: Any = None if body is None else json.dumps(body)
        if raw is not None:
            data = io.BytesIO(raw)  # aiohttp warns of a large bytes body
        async with self.session.request(method, self.url + path, data=data, **kw) as r:
            text = await r.text()
            return Answer(r.status, r.content_type, json.loads(text) if text else None, r.headers)


Serve = Callable[..., Awaitable[Api]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    started: list[tuple[assembly.RunningBroker, aiohttp.ClientSession]] = []

    async def start(ssl: Any = None, **settings: Any) -> Api:
        config = BrokerConfig(
            **{"listen": "127.0.0.1:0", "storage": "memory://", "http": "127.0.0.1:0", **settings}
        )
        broker = await assembly.start(config)
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl))
        started.append((broker, session))
        assert broker.http_endpoint is not None
        return Api(broker.http_endpoint.url, f"127.0.0.1:{broker.port}", session, broker)

    yield start
    for broker, session in started:
        await session.close()
        await broker.stop()


@pytest.fixture
async def api(serve: Serve) -> Api:
    return await serve()
