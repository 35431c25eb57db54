"""A webhook sink process for the benchmarks: answers 200 and records lateness.

    python benchmarks/suite/webhook_sink.py      # prints "sink listening on PORT"

Each POST's lateness is the sink's wall clock when the request's head has been
read, minus its ``Dejaq-Timestamp-Ms``. ``GET /stats`` answers them (and the
ids seen twice); ``POST /reset`` forgets them.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

latenesses: list[float] = []
ids: set[str] = set()
doubled = 0


async def hook(request: web.Request) -> web.Response:
    global doubled
    arrived = time.time() * 1000
    latenesses.append(arrived - int(request.headers["Dejaq-Timestamp-Ms"]))
    mid = request.headers["Dejaq-Id"]
    if mid in ids:
        doubled += 1
    ids.add(mid)
    await request.read()
    return web.Response(status=200)


async def stats(_: web.Request) -> web.Response:
    return web.json_response({"latenesses": latenesses, "doubled": doubled, "count": len(ids)})


async def reset(_: web.Request) -> web.Response:
    global doubled
    latenesses.clear()
    ids.clear()
    doubled = 0
    return web.Response(status=204)


async def main() -> None:
    app = web.Application()
    app.router.add_post("/hook", hook)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"sink listening on {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
