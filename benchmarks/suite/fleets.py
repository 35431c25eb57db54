"""Groups of consumer processes, seen from the harness: start, take what they saw, stop.

- ``workers``: worker processes from ``workers.py`` (the driver's plain loop,
  or the rival's pollers);
- ``cli``: ``dejaq consume TOPIC --broker ADDR`` processes, as a user runs
  them; each prints one JSON line per delivery (``received_at_ms``,
  ``timestamp_ms``) into a file the harness reads.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from dejaq.driver.admin import Admin
from dejaq.driver.client import Client

from .broker import dejaq_command, stop
from .workers import STOP_TIMEOUT_S, Record, Worker, WorkerFailed

TAKE_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 30.0


class Fleet(Protocol):
    size: int

    def pids(self) -> list[int]: ...

    async def take(self) -> list[Record]: ...
    async def stop(self) -> list[Record]: ...


class WorkerFleet:
    """``size`` worker processes running ``target(conn, *args)``."""

    def __init__(self, label: str, size: int, target: Callable[..., None], *args: Any) -> None:
        self.size = size
        self.workers = [Worker(f"{label}-{i}", target, *args) for i in range(size)]

    def pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    async def start(self) -> WorkerFleet:
        try:
            await asyncio.gather(*(w.ready() for w in self.workers))
        except BaseException:
            await self.stop()
            raise
        return self

    async def take(self) -> list[Record]:
        answers = await asyncio.gather(*(w.ask(("take",), TAKE_TIMEOUT_S) for w in self.workers))
        return self._merge(answers)

    async def flush(self) -> int:
        """Wait until every consumer's acks so far are confirmed; when the last was (ns)."""
        answers = await asyncio.gather(*(w.ask(("flush",), TAKE_TIMEOUT_S) for w in self.workers))
        return max(int(a) for a in answers)

    async def stop(self) -> list[Record]:
        answers = await asyncio.gather(*(w.stop() for w in self.workers), return_exceptions=True)
        failures = [a for a in answers if isinstance(a, BaseException)]
        if failures:
            raise WorkerFailed("; ".join(str(f) for f in failures))
        return self._merge(
            [a for a in answers if a is not None and not isinstance(a, BaseException)]
        )

    def _merge(self, answers: Sequence[list[Record]]) -> list[Record]:
        return [record for got in answers for record in got]


class CliFleet:
    """``size`` ``dejaq consume`` processes, their JSON lines read from files."""

    def __init__(self, address: str, topic: str, size: int, workdir: Path) -> None:
        self.address = address
        self.topic = topic
        self.size = size
        self.workdir = workdir
        self.procs: list[asyncio.subprocess.Process] = []
        self.outputs: list[IO[bytes]] = []
        self.rests: list[bytes] = []
        self.bad_lines = 0

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    async def start(self, client: Client) -> CliFleet:
        try:
            for i in range(self.size):
                path = self.workdir / f"consume-{self.topic}-{i}.jsonl"
                # The process writes through its own file description; we read
                # through another, so neither moves the other's offset.
                with path.open("wb") as out, path.with_suffix(".err").open("wb") as err:
                    self.procs.append(
                        await asyncio.create_subprocess_exec(
                            *dejaq_command(),
                            *("consume", self.topic, "--broker", self.address),
                            stdout=out,
                            stderr=err,
                        )
                    )
                self.outputs.append(path.open("rb"))
                self.rests.append(b"")
            await self._connected(client)
        except BaseException:
            await self.stop()
            raise
        return self

    async def _connected(self, client: Client) -> None:
        """Wait (bounded) until the broker counts every process as a consumer."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while (await Admin(client).describe_topic(self.topic)).consumers < self.size:
            self._check_alive()
            if time.monotonic() > deadline:
                raise WorkerFailed(f"dejaq consume did not connect in {CONNECT_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.05)  # polling a condition under a deadline

    def _check_alive(self) -> None:
        for i, p in enumerate(self.procs):
            if p.returncode is not None:
                err = (self.workdir / f"consume-{self.topic}-{i}.err").read_text(errors="replace")
                tail = " | ".join(err.strip().splitlines()[-3:])
                raise WorkerFailed(f"dejaq consume exited with {p.returncode}: {tail}")

    async def take(self) -> list[Record]:
        self._check_alive()
        return self._read()

    def _read(self) -> list[Record]:
        got: list[Record] = []
        for i, out in enumerate(self.outputs):
            text = self.rests[i] + out.read()
            complete, _, self.rests[i] = text.rpartition(b"\n")
            for line in complete.splitlines():
                try:
                    d = json.loads(line)
                    got.append(
                        (int(d["received_at_ms"]) * 1_000_000, int(d["timestamp_ms"]), d["id"])
                    )
                except (ValueError, KeyError, TypeError):
                    self.bad_lines += 1
        return got

    async def stop(self) -> list[Record]:
        """SIGTERM (the CLI flushes its acks and says goodbye), then what is left to read."""
        await asyncio.gather(*(stop(p, STOP_TIMEOUT_S) for p in self.procs))
        got = self._read() if self.outputs else []
        for out in self.outputs:
            out.close()
        self.outputs = []
        return got
