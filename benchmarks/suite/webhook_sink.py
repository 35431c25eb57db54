"""A webhook sink process for the benchmarks: answers 200 and records lateness.

    python benchmarks/suite/webhook_sink.py      # prints "sink listening on PORT"

Each POST's lateness is the sink's wall clock when the read that brought the
request's first byte returned, minus its ``Dejaq-Timestamp-Ms`` (the message's
due time). ``GET /stats`` answers them (and the ids seen twice), ``GET
/count`` only how many ids came (cheap enough to ask while a step runs:
encoding every lateness takes the sink milliseconds, and requests wait
meanwhile); ``POST /reset`` forgets them.

HTTP/1.1 is read by hand on an asyncio protocol, keep-alive, bodies by
Content-Length (what the broker sends): a framework's server would add its
own per-request work to the figure and take CPU from the broker it measures
on a small machine.
"""

from __future__ import annotations

import asyncio
import json
import time

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
NO_CONTENT = b"HTTP/1.1 204 No Content\r\n\r\n"


def _json(value: object) -> bytes:
    body = json.dumps(value).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


class Records:
    def __init__(self) -> None:
        self.latenesses: list[float] = []
        self.ids: set[str] = set()
        self.doubled = 0

    def hook(self, arrived_ms: float, headers: dict[str, str]) -> None:
        self.latenesses.append(arrived_ms - int(headers["dejaq-timestamp-ms"]))
        mid = headers["dejaq-id"]
        if mid in self.ids:
            self.doubled += 1
        self.ids.add(mid)

    def stats(self) -> bytes:
        return _json(
            {"latenesses": self.latenesses, "doubled": self.doubled, "count": len(self.ids)}
        )

    def count(self) -> bytes:
        return _json({"count": len(self.ids)})

    def reset(self) -> None:
        self.latenesses.clear()
        self.ids.clear()
        self.doubled = 0


class Sink(asyncio.Protocol):
    def __init__(self, records: Records) -> None:
        self.records = records
        self.buffer = b""
        self.started_ms: float | None = None  # when the pending request's first byte came
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now_ms = time.time() * 1000
        if not self.buffer:
            self.started_ms = now_ms
        self.buffer += data
        out: list[bytes] = []
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            size = int(headers.get("content-length", "0"))
            if len(self.buffer) < end + 4 + size:
                break  # the body is still on its way
            self.buffer = self.buffer[end + 4 + size :]
            method, path, _ = head[0].split(" ", 2)
            out.append(self.answer(method, path, headers))
            # The next request in this read came with it.
            self.started_ms = now_ms
        if out:
            assert self.transport is not None
            self.transport.write(b"".join(out))

    def answer(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        if method == "POST" and path == "/hook":
            assert self.started_ms is not None
            self.records.hook(self.started_ms, headers)
            return OK
        if method == "GET" and path == "/count":
            return self.records.count()
        if method == "GET" and path == "/stats":
            return self.records.stats()
        if method == "POST" and path == "/reset":
            self.records.reset()
            return NO_CONTENT
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


async def main() -> None:
    records = Records()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Sink(records), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"sink listening on {port}", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
