"""A real HTTP endpoint on 127.0.0.1 that records every webhook request.

``answer`` decides each reply from the request (and how many came before for
its message id): a status and headers, or it awaits (a request left hanging).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import unquote

from aiohttp import web


@dataclass(frozen=True)
class Hit:
    """One request as it arrived."""

    arrived_ms: int  # the sink's wall clock when the request's head was read
    id: str
    due_ms: int
    delivery: int
    signature: str
    body: bytes
    headers: dict[str, str]
    pairs: tuple[tuple[str, str], ...] = ()  # every header line, repeated names kept


Reply = tuple[int, dict[str, str]]
Answer = Callable[[Hit, int], Reply | Awaitable[Reply]]  # (hit, earlier hits of its id)


def always(status: int) -> Answer:
    return lambda hit, before: (status, {})


@dataclass
class Sink:
    answer: Answer = field(default_factory=lambda: always(200))
    hits: list[Hit] = field(default_factory=list)
    answered: list[tuple[Hit, int]] = field(default_factory=list)  # replies that were sent
    _runner: web.AppRunner | None = None
    url: str = ""
    _released: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> Sink:
        """Listen on 127.0.0.1."""
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/hook"
        return self

    async def stop(self) -> None:
        self._released.set()  # requests left hanging are answered (to nobody, mostly)
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        arrived = int(time.time() * 1000)
        h = request.headers
        hit = Hit(
            arrived,
            unquote(h.get("Dejaq-Id", "")),  # percent-encoded UTF-8
            int(h.get("Dejaq-Timestamp-Ms", "0")),
            int(h.get("Dejaq-Delivery", "0")),
            h.get("Dejaq-Signature", ""),
            await request.read(),
            dict(h),
            tuple(h.items()),
        )
        before = sum(1 for x in self.hits if x.id == hit.id)
        self.hits.append(hit)
        reply = self.answer(hit, before)
        if not isinstance(reply, tuple):
            reply = await reply
        status, headers = reply
        self.answered.append((hit, status))
        return web.Response(status=status, headers=headers)

    def ok_ids(self) -> set[str]:
        """Ids the sink answered with a 2xx."""
        return {hit.id for hit, status in self.answered if 200 <= status < 300}

    def of(self, mid: str) -> list[Hit]:
        return [h for h in self.hits if h.id == mid]

    async def hang(self) -> Reply:
        """Answer only when the sink stops (the caller is long gone by then)."""
        await self._released.wait()
        return 503, {}
