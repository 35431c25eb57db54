"""How many slow HTTP clients a broker keeps open: slowloris and endless uploads.

    python benchmarks/http_slowloris.py                        # 500 + 20, held 65 s
    python benchmarks/http_slowloris.py --connections 1500 --hold-s 20
    python benchmarks/http_slowloris.py --set DEJAQ_HTTP_HEADER_TIMEOUT_MS=2000

A fresh ``dejaq broker --storage memory:// --http`` process (``--set`` adds
``DEJAQ_*`` settings to its environment), then, all at once:

- ``--connections`` slowloris clients: a request line, then one more header
  line every ``--interval-s``, never the blank line that ends the head;
- ``--uploads`` endless uploads: a chunked produce batch, one chunk every
  ``--interval-s``, never the last chunk.

Every ``--every-s`` it prints how many of each the broker still holds open,
and how long an ordinary ``GET /v1/topics`` on a new connection takes then (or
that it failed). A figure, not a test: the machine's load moves it.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import urllib.request
from dataclasses import dataclass, field

from suite.broker import broker

HEAD = b"GET /v1/topics HTTP/1.1\r\nHost: bench\r\n"
UPLOAD = (
    b"POST /v1/topics/bench/batches HTTP/1.1\r\nHost: bench\r\n"
    b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)


@dataclass
class Held:
    """Connections of one kind and how many the broker has closed."""

    opened: int = 0
    closed: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def open(self) -> int:
        return self.opened - self.closed


async def slow_client(
    host: str, port: int, first: bytes, piece: bytes, gap: float, held: Held
) -> None:
    """Send ``first``, then ``piece`` every ``gap`` s, until the broker closes."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        held.opened += 1
        held.closed += 1
        return
    held.opened += 1
    try:
        writer.write(first)
        reading = asyncio.ensure_future(reader.read())  # to the close: what the broker says
        while not reading.done():
            await asyncio.wait([reading], timeout=gap)
            if not reading.done():
                writer.write(piece)
                await writer.drain()
        reading.result()
    except OSError:
        pass
    finally:
        held.closed += 1
        writer.close()


def probe(url: str) -> str:
    """An ordinary request on a new connection: its time, or why it failed."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url + "/v1/topics", timeout=10) as answer:
            answer.read()
        return f"{(time.monotonic() - started) * 1000:.0f} ms"
    except OSError as exc:
        return f"failed ({type(exc).__name__})"


async def run(args: argparse.Namespace) -> None:
    env = dict(item.split("=", 1) for item in args.set)
    async with broker("memory://", env=env) as b:
        host, port = b.http.removeprefix("http://").rsplit(":", 1)
        loris, uploads = Held(), Held()
        loris.tasks = [
            asyncio.create_task(
                slow_client(host, int(port), HEAD, b"X-A: b\r\n", args.interval_s, loris)
            )
            for _ in range(args.connections)
        ]
        uploads.tasks = [
            asyncio.create_task(
                slow_client(host, int(port), UPLOAD, b"1\r\n \r\n", args.interval_s, uploads)
            )
            for _ in range(args.uploads)
        ]
        started = time.monotonic()
        while loris.opened + uploads.opened < args.connections + args.uploads:
            assert time.monotonic() - started < 60, "the clients could not connect"
            await asyncio.sleep(0.05)
        started = time.monotonic()  # from when all are connected
        print(f"{'t (s)':>6} {'slowloris open':>15} {'uploads open':>13}  ordinary request")
        while (t := time.monotonic() - started) < args.hold_s:
            answer = await asyncio.to_thread(probe, b.http)
            print(_row(t, loris, uploads, answer))
            await asyncio.sleep(args.every_s)
        t = time.monotonic() - started
        print(_row(t, loris, uploads, "(end)"))
        for task in loris.tasks + uploads.tasks:
            task.cancel()
        await asyncio.gather(*loris.tasks, *uploads.tasks, return_exceptions=True)


def _row(t: float, loris: Held, uploads: Held, answer: str) -> str:
    held = f"{loris.open:>9}/{loris.opened:<5} {uploads.open:>7}/{uploads.opened:<5}"
    return f"{t:6.0f} {held}  {answer}"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--connections", type=int, default=500, help="slowloris clients (default 500)")
    p.add_argument("--uploads", type=int, default=20, help="endless chunked uploads (default 20)")
    p.add_argument("--hold-s", type=float, default=65.0, help="how long they try (default 65)")
    p.add_argument("--interval-s", type=float, default=2.0, help="a byte this often (default 2)")
    p.add_argument("--every-s", type=float, default=5.0, help="report this often (default 5)")
    p.add_argument(
        "--set", action="append", default=[], metavar="DEJAQ_X=V", help="broker settings"
    )
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
