"""The load's own OS processes: the producer, the consumers and the Redis pollers.

Each is a process of its own that shares nothing with the harness, forked from
a fork server (``multiprocessing`` "forkserver": a fresh interpreter that
imported the load's modules once, so a worker does not import the driver, numpy
and gRPC again: ~0.7 s of CPU each, about 170 workers a smoke run), and driven
over a pipe. The harness sends commands
(``("take",)``, ``("steady", ...)``, ``("stop",)``); the process answers each
with ``("ok", value)`` or ``("error", text)``, and says ``("ok", "ready")``
once it is connected.

- consumer: the loop users write, with the driver's default settings::

      async with Client(addr) as client:
          async with Consumer(client, topic) as consumer:
              async for d in consumer:
                  await d.ack()

  recording, for each delivery, its own clock when it took it, the due time
  and the id: ``take`` hands over what was recorded since the last ``take``;
  ``flush`` waits until the broker confirmed every ack made so far
  (``Consumer.flush``) and answers the time it did.
- producer: ``Producer.send_batch`` (or the rival's ZADD + HSET pipeline) on a
  schedule: every 100 ms, ``rate / 10`` messages due evenly across a 100 ms
  window ``lead_ms`` ahead, so ``rate`` messages a second become due steadily.
- poller: the rival's consumer, ``POP_DUE`` every ``poll_ms``, acks by
  ``ZREM`` + ``HDEL``.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from array import array
from collections.abc import Awaitable, Callable, Coroutine
from multiprocessing.connection import Connection
from typing import Any, Protocol

from redis.asyncio import Redis

from dejaq.core.clock import now_ms
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing, Producer

from . import prioritized, rival
from .messages import PAYLOAD

CTX = multiprocessing.get_context("forkserver")
# The harness's main module (benchmarks/run.py: every scenario) and the modules
# the workers' entry points live in.
CTX.set_forkserver_preload(["__main__", __name__, f"{__package__}.relay"])
TICK_MS = 100  # the producer's schedule: one batch of due times per tick
CHUNK = 1000  # messages per Produce frame (and per rival pipeline)
STOP_TIMEOUT_S = 20.0
# (received: wall clock ns when the delivery was taken, due: timestamp ms, id)
Record = tuple[int, int, str]
IDS_JOINED = 1024
ID_SEP = "\0"  # no id the load makes has one


class WorkerFailed(RuntimeError):
    """A load process failed or did not answer; the message says which and why."""


# -- the harness side -----------------------------------------------------------


class Worker:
    """One worker process and its command pipe."""

    def __init__(self, name: str, target: Callable[..., None], *args: Any) -> None:
        self.name = name
        self.conn, child = CTX.Pipe()
        self.proc = CTX.Process(target=target, args=(child, *args), name=name, daemon=True)
        self.proc.start()
        child.close()

    @property
    def pid(self) -> int:
        return self.proc.pid or 0

    async def ready(self, timeout_s: float = 30.0) -> None:
        await self._reply(timeout_s)

    async def ask(self, command: tuple[Any, ...], timeout_s: float) -> Any:
        try:
            self.conn.send(command)
        except (BrokenPipeError, OSError) as exc:
            raise WorkerFailed(f"{self.name} is gone ({exc})") from exc
        return await self._reply(timeout_s)

    async def _reply(self, timeout_s: float) -> Any:
        if not await asyncio.to_thread(self.conn.poll, timeout_s):
            raise WorkerFailed(f"{self.name} did not answer in {timeout_s:.0f} s")
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError) as exc:
            raise WorkerFailed(f"{self.name} exited ({self.proc.exitcode})") from exc
        if status != "ok":
            raise WorkerFailed(f"{self.name}: {value}")
        return value

    async def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> Any:
        """Ask it to finish (its last answer is returned), then make sure it is gone."""
        try:
            if self.proc.is_alive():
                return await self.ask(("stop",), timeout_s)
            return None
        finally:
            await asyncio.to_thread(self.proc.join, 5)
            if self.proc.is_alive():
                self.proc.kill()
                await asyncio.to_thread(self.proc.join, 5)
            self.conn.close()


# -- the process side -------------------------------------------------------------


class Service(Protocol):
    async def start(self) -> None: ...
    async def handle(self, command: tuple[Any, ...]) -> Any: ...
    async def stop(self) -> Any: ...


def serve(conn: Connection, service: Service) -> None:
    """A worker process's body: start ``service``, then answer the harness's
    commands until ``stop`` (shared with ``relay.py``'s processes)."""
    asyncio.run(_main(conn, service))


async def _main(conn: Connection, service: Service) -> None:
    try:
        await service.start()
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ok", "ready"))
    loop = asyncio.get_running_loop()
    commands: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()

    def readable() -> None:
        try:
            commands.put_nowait(conn.recv())
        except (EOFError, OSError):  # the harness is gone: stop
            loop.remove_reader(conn.fileno())
            commands.put_nowait(None)

    loop.add_reader(conn.fileno(), readable)
    while True:
        command = await commands.get()
        last = command is None or command[0] == "stop"
        try:
            result = await (service.stop() if last else service.handle(command))  # type: ignore[arg-type]
            reply: tuple[str, Any] = ("ok", result)
        except Exception as exc:
            reply = ("error", f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(OSError):
            conn.send(reply)
        if last:
            loop.remove_reader(conn.fileno())
            return


class Recorder:
    """What a consumer saw since the last ``take``, and the task that saw it.

    Kept in flat arrays and joined strings, not a tuple a delivery: a list of a
    million small objects makes each full collection of the consumer's
    interpreter walk them all (one cache miss each, tens of ms at 50k msgs/s),
    a pause of the load's own making that would show up as lateness.
    """

    def __init__(self) -> None:
        self._at = array("q")  # received, ns
        self._due = array("q")  # timestamp, ms
        self._ids: list[str] = []  # ids joined by ID_SEP, IDS_JOINED at a time
        self._open: list[str] = []  # ids not joined yet
        self.task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    def add(self, received_ns: int, due_ms: int, id: str) -> None:
        self._at.append(received_ns)
        self._due.append(due_ms)
        self._open.append(id)
        if len(self._open) >= IDS_JOINED:
            self._ids.append(ID_SEP.join(self._open))
            self._open = []

    async def started(self, loop: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.task = asyncio.create_task(loop())
        waiting = asyncio.create_task(self.ready.wait())
        await asyncio.wait({self.task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if self.task.done():
            self.task.result()  # raises what stopped it
            raise RuntimeError("the consume loop ended before it started")

    def take(self) -> list[Record]:
        if self.task is not None and self.task.done() and not self.task.cancelled():
            self.task.result()  # a loop that died raises here, in the answer to the harness
        ids = [i for chunk in self._ids for i in chunk.split(ID_SEP)] + self._open
        got = list(zip(self._at.tolist(), self._due.tolist(), ids, strict=True))
        self._at, self._due, self._ids, self._open = array("q"), array("q"), [], []
        return got

    async def finish(self, close: Callable[[], Awaitable[None]]) -> list[Record]:
        if self.task is not None and not self.task.done():
            await close()
            try:
                await asyncio.wait_for(self.task, STOP_TIMEOUT_S)
            except TimeoutError:
                self.task.cancel()
        return self.take()


class ConsumerService:
    def __init__(self, address: str, topic: str) -> None:
        self.address = address
        self.topic = topic
        self.rec = Recorder()
        self.consumer: Consumer | None = None

    async def start(self) -> None:
        await self.rec.started(self.loop)

    async def loop(self) -> None:
        rec = self.rec
        async with Client(self.address) as client:
            async with Consumer(client, self.topic) as consumer:
                self.consumer = consumer
                rec.ready.set()
                async for d in consumer:
                    rec.add(time.time_ns(), d.timestamp_ms, d.id)
                    await d.ack()

    async def handle(self, command: tuple[Any, ...]) -> Any:
        if command[0] == "take":
            return self.rec.take()
        if command[0] == "flush" and self.consumer is not None:
            await self.consumer.flush()
            return time.time_ns()
        raise ValueError(f"unknown command {command[0]!r}")

    async def stop(self) -> Any:
        consumer = self.consumer

        async def close() -> None:
            if consumer is not None:
                await consumer.close()

        return await self.rec.finish(close)


class PollerService:
    """The rival's consumer: POP_DUE every ``poll_ms`` (again at once while a pop
    comes back full), one ZREM + HDEL pipeline per popped batch."""

    def __init__(self, url: str, poll_ms: float) -> None:
        self.url = url
        self.tick_s = poll_ms / 1000
        self.rec = Recorder()
        self.running = True

    async def start(self) -> None:
        await self.rec.started(self.loop)

    async def loop(self) -> None:
        rec = self.rec
        r = Redis.from_url(self.url)
        try:
            pop = r.register_script(rival.POP_DUE)
            await r.ping()
            rec.ready.set()
            tick = time.perf_counter()
            while self.running:
                while True:
                    now = now_ms()
                    args = [now, rival.POP_BATCH, now + rival.LEASE_MS]
                    reply = await pop(keys=[rival.QUEUE, rival.PAYLOADS], args=args)
                    if not reply:
                        break
                    at = time.time_ns()
                    flat = reply[0]
                    ids = flat[0::2]
                    for i, score in zip(ids, flat[1::2], strict=True):
                        rec.add(at, int(float(score)), i.decode())
                    await rival.ack(r, ids)
                    if len(ids) < rival.POP_BATCH:
                        break
                tick += self.tick_s
                delay = tick - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    tick = time.perf_counter()
        finally:
            await r.aclose()

    async def handle(self, command: tuple[Any, ...]) -> Any:
        if command[0] == "take":
            return self.rec.take()
        raise ValueError(f"unknown command {command[0]!r}")

    async def stop(self) -> Any:
        async def close() -> None:
            self.running = False

        return await self.rec.finish(close)


class Sink(Protocol):
    async def send(
        self,
        topic: str,
        ids: list[str],
        dues: list[int],
        keys: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> int: ...
    async def close(self) -> None: ...


class DejaqSink:
    """``Producer.send_batch``: one frame per chunk, one Producer per topic."""

    def __init__(self, address: str, in_flight: int) -> None:
        self.client = Client(address)
        self.in_flight = in_flight
        self.producers: dict[str, Producer] = {}

    async def send(
        self,
        topic: str,
        ids: list[str],
        dues: list[int],
        keys: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> int:
        producer = self.producers.get(topic)
        if producer is None:
            producer = Producer(self.client, topic, max_batch=CHUNK, max_in_flight=self.in_flight)
            self.producers[topic] = producer
        if keys is None and headers is None:
            batch = [Outgoing(PAYLOAD, due, id=i) for i, due in zip(ids, dues, strict=True)]
        else:
            named = keys if keys is not None else [""] * len(ids)
            batch = [
                Outgoing(PAYLOAD, due, id=i, key=k, headers=headers)
                for i, due, k in zip(ids, dues, named, strict=True)
            ]
        return sum(r.accepted for r in await producer.send_batch(batch))

    async def close(self) -> None:
        for producer in self.producers.values():
            await producer.close()
        await self.client.close()


class ZsetSink:
    """The rival's produce: a ZADD + HSET pipeline per chunk."""

    def __init__(self, url: str) -> None:
        self.r = Redis.from_url(url)

    async def send(
        self,
        topic: str,
        ids: list[str],
        dues: list[int],
        keys: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> int:
        return await rival.insert(self.r, ids, dues)  # a sorted set has no keys

    async def close(self) -> None:
        await self.r.aclose()


class ProducerService:
    def __init__(self, kind: str, target: str, in_flight: int) -> None:
        self.sink: Sink = (
            DejaqSink(target, in_flight) if kind == "dejaq" else ZsetSink(target)  # "zset"
        )
        self.slots = asyncio.Semaphore(in_flight)

    async def start(self) -> None:
        pass  # both sinks connect on first use

    async def handle(self, command: tuple[Any, ...]) -> Any:
        if command[0] == "steady":
            return await self.steady(*command[1:])
        if command[0] == "bulk":
            return await self.bulk(*command[1:])
        if command[0] == "burst":
            return await self.burst(*command[1:])
        if command[0] == "campaign":
            return await self.campaign(*command[1:])
        if command[0] in ("trickle", "backlog") and isinstance(self.sink, DejaqSink):
            run = prioritized.trickle if command[0] == "trickle" else prioritized.backlog
            return await run(self.sink.client, *command[1:])
        if command[0] == "round_trips" and isinstance(self.sink, DejaqSink):
            return await prioritized.round_trips(self.sink.client, *command[1:])
        raise ValueError(f"unknown command {command[0]!r}")

    async def stop(self) -> Any:
        await self.sink.close()
        return None

    async def steady(
        self,
        topic: str,
        rate: int,
        seconds: float,
        start_ms: int,
        lead_ms: int,
        prefix: str,
        keys: int = 0,
        headers: int = 0,
    ) -> dict[str, Any]:
        """Every TICK_MS from ``start_ms``: ``rate * TICK_MS / 1000`` messages due evenly
        across the TICK_MS window starting ``lead_ms`` later. Answers once every
        frame is answered: counts, and whether any frame was answered only after
        its first message was due (then lateness would measure the producer).
        ``keys``: each message keyed round that many keys (0: no key); ``headers``:
        that many small headers on each message (0: none)."""
        carried = {f"h{j}": f"value-{j:04d}" for j in range(headers)} or None
        ticks = max(1, round(seconds * 1000 / TICK_MS))
        per_tick = rate * TICK_MS / 1000
        out = {"sent": 0, "accepted": 0, "late_frames": 0, "slowest_answer_ms": 0.0}
        behind_ms = 0.0
        sending: list[asyncio.Task[None]] = []
        seq = 0

        async def send(ids: list[str], dues: list[int], sent_at_ms: float) -> None:
            named = [f"k{int(i[-9:]) % keys:05d}" for i in ids] if keys else None
            accepted = await self.sink.send(topic, ids, dues, named, carried)
            answered = time.time_ns() / 1e6
            out["accepted"] += accepted
            out["late_frames"] += answered >= dues[0]
            out["slowest_answer_ms"] = max(out["slowest_answer_ms"], answered - sent_at_ms)

        for k in range(ticks):
            send_at = start_ms + k * TICK_MS
            wait_ms = send_at - time.time_ns() / 1e6
            if wait_ms > 0:
                await asyncio.sleep(wait_ms / 1000)
            else:
                behind_ms = max(behind_ms, -wait_ms)
            n = round((k + 1) * per_tick) - round(k * per_tick)
            if n <= 0:
                continue
            first_due = send_at + lead_ms
            dues = [first_due + (j * TICK_MS) // n for j in range(n)]
            ids = [f"{prefix}{seq + j:022d}" for j in range(n)]
            seq += n
            out["sent"] += n
            sent_at = time.time_ns() / 1e6
            for c in range(0, n, CHUNK):
                task = asyncio.create_task(send(ids[c : c + CHUNK], dues[c : c + CHUNK], sent_at))
                sending.append(task)
        await asyncio.gather(*sending)
        out["slowest_answer_ms"] = round(out["slowest_answer_ms"], 1)
        out["behind_schedule_ms"] = round(behind_ms, 1)
        return out

    async def bulk(self, topic: str, n: int, prefix: str) -> dict[str, Any]:
        """``n`` messages due the moment each frame is built, as fast as frames are
        answered (``in_flight`` at once)."""
        accepted = 0

        async def send(start: int) -> None:
            nonlocal accepted
            async with self.slots:
                count = min(CHUNK, n - start)
                ids = [f"{prefix}{start + j:022d}" for j in range(count)]
                ok = await self.sink.send(topic, ids, [now_ms()] * count)
                accepted += ok  # not `+= await`: that reads the total before awaiting

        started = time.time_ns()
        await asyncio.gather(*(send(s) for s in range(0, n, CHUNK)))
        return {"sent": n, "accepted": accepted, "start_ns": started, "end_ns": time.time_ns()}

    async def burst(self, topic: str, n: int, due_ms: int, prefix: str) -> dict[str, Any]:
        """``n`` messages all due at ``due_ms`` (``in_flight`` frames at once)."""
        accepted = 0

        async def send(start: int) -> None:
            nonlocal accepted
            async with self.slots:
                count = min(CHUNK, n - start)
                ids = [f"{prefix}{start + j:022d}" for j in range(count)]
                ok = await self.sink.send(topic, ids, [due_ms] * count)
                accepted += ok

        await asyncio.gather(*(send(s) for s in range(0, n, CHUNK)))
        return {"sent": n, "accepted": accepted, "answered_ms": now_ms()}

    async def campaign(
        self, topic: str, load: tuple[Any, ...], due_ms: int, keyed: bool
    ) -> dict[str, Any]:
        """The fairness load (``scenarios/fairness.py``): first the reminders of
        ``keys`` keys, ``per_key`` a second each over ``seconds`` from a second
        before ``due_ms`` (ids ``r-KEY-N``, key ``kKEY``), then ``n`` campaign
        messages all due at ``due_ms`` (ids ``c-N``, key ``campaign``);
        ``keyed`` False sends the same without keys."""
        n, keys, per_key, seconds = load
        accepted = 0
        per = int(per_key * seconds)
        step = 1000 / per_key
        ids, dues, names = [], [], []
        for j in range(keys):
            for i in range(per):
                ids.append(f"r-{j:03d}-{i:06d}")
                dues.append(due_ms - 1000 + int(i * step + j * step / keys))
                names.append(f"k{j:03d}")

        async def send(ids: list[str], dues: list[int], names: list[str]) -> None:
            nonlocal accepted
            async with self.slots:
                ok = await self.sink.send(topic, ids, dues, names if keyed else None)
                accepted += ok

        chunks = range(0, len(ids), CHUNK)
        await asyncio.gather(
            *(send(ids[c : c + CHUNK], dues[c : c + CHUNK], names[c : c + CHUNK]) for c in chunks)
        )
        reminders = accepted

        async def burst(start: int) -> None:
            count = min(CHUNK, n - start)
            ids = [f"c-{start + j:022d}" for j in range(count)]
            await send(ids, [due_ms] * count, ["campaign"] * count)

        await asyncio.gather(*(burst(s) for s in range(0, n, CHUNK)))
        return {"reminders": reminders, "campaign": accepted - reminders, "answered_ms": now_ms()}


# -- entry points (module-level: the worker process imports them by name) --


def consumer_main(conn: Connection, address: str, topic: str) -> None:
    serve(conn, ConsumerService(address, topic))


def poller_main(conn: Connection, url: str, poll_ms: float) -> None:
    serve(conn, PollerService(url, poll_ms))


def producer_main(conn: Connection, kind: str, target: str, in_flight: int) -> None:
    serve(conn, ProducerService(kind, target, in_flight))
