"""Consumers through outages behind them: a lone broker killed and restarted, and
the storage behind a broker stopped and started again. A consumer says so once
and carries on; one whose broker rides the outage out keeps its stream."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

from dejaq.core.errors import BrokerUnavailable, StorageUnavailable
from dejaq.driver import Admin, Client, Consumer
from tests.e2e.broker_process import BrokerProcess, StartBroker
from tests.e2e.support import now_ms, produce_one, wait_until
from tests.redis_server import RedisServer
from tests.servers import require_binary

CONSUMER_LOG = "dejaq.driver.consumer"
RESUME_S = 30.0  # a back-off step is at most 1 s: far more than enough on a busy machine
LEASE_MS = 2_000
RETRY_S = 120.0  # the driver consumer's: longer than a broker's restart on a busy machine


def _dejaq() -> list[str]:
    """The installed ``dejaq`` console script (next to this Python), else the module."""
    script = shutil.which("dejaq", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "dejaq.driver.cli.main"]


class Lines:
    """The lines a child process writes to one of its pipes, as they come."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self._task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.lines.append(line.decode())

    def having(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def _produce_once_up(address: str, topic: str, message_id: str) -> None:
    """Produce ``message_id`` due now, trying again while the broker is not up yet
    (this process's channels to the address may still be backing off)."""

    async def produced() -> bool:
        try:
            async with Client(address, timeout_s=5) as client:
                await produce_one(client, topic, now_ms(), b"x", id=message_id)
        except BrokerUnavailable:
            return False
        return True

    await wait_until(produced, RESUME_S, f"{message_id} produced")


def _lost_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == CONSUMER_LOG and r.levelno == logging.WARNING and "lost" in r.getMessage()
    ]


async def test_a_lone_broker_killed_and_restarted_its_consumers_say_so_once_and_resume(
    start_broker: StartBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=CONSUMER_LOG)
    # Given one broker (a single --broker, as docs/cluster.md's demo runs it) on a
    # SQLite file, a driver consumer and a `dejaq consume` on two topics
    storage = f"sqlite:///{tmp_path / 'lone.db'}"
    broker = start_broker(storage)
    async with Client(broker.address) as admin:
        await Admin(admin).create_topic("by-driver")
        await Admin(admin).create_topic("by-cli")
    client = Client(broker.address, timeout_s=5)
    consumer = Consumer(client, "by-driver", consumer_id="driver", retry_timeout_s=RETRY_S)
    await consumer.start()
    env = {k: v for k, v in os.environ.items() if k != "DEJAQ_BROKER"}
    cli = await asyncio.create_subprocess_exec(
        *_dejaq(),
        "consume",
        "by-cli",
        "--broker",
        broker.address,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert cli.stdout is not None and cli.stderr is not None
    out, err = Lines(cli.stdout), Lines(cli.stderr)
    again: BrokerProcess | None = None
    try:
        # (the command's consumer is in: a message reaches it)
        async with Client(broker.address) as producer:
            await produce_one(producer, "by-cli", now_ms(), b"before", id="before")
        await wait_until(lambda: out.having('"before"'), RESUME_S, "dejaq consume to start")
        # When the broker is killed
        broker.kill()
        # Then each consumer says so: the driver in one warning, the command on stderr
        await wait_until(lambda: _lost_lines(caplog), RESUME_S, "the driver's warning")
        await wait_until(lambda: err.having("lost its stream"), RESUME_S, "a line on stderr")
        # When it comes back on the same address, and messages fall due
        again = BrokerProcess(storage, tmp_path / "again.log", args=("--listen", broker.address))
        again.start()
        await _produce_once_up(again.address, "by-driver", "after-driver")
        await _produce_once_up(again.address, "by-cli", "after-cli")
        # Then both get them, the command still running
        d = await consumer.receive(RESUME_S)
        assert d is not None and d.id == "after-driver"
        await d.ack()
        await wait_until(lambda: out.having('"after-cli"'), RESUME_S, "dejaq consume to resume")
        assert cli.returncode is None, err.lines
        # and the outage was told once each
        assert len(_lost_lines(caplog)) == 1, [r.getMessage() for r in _lost_lines(caplog)]
        assert len(err.having("lost its stream")) == 1, err.lines
    finally:
        if cli.returncode is None:
            cli.terminate()
        await cli.wait()
        await out.close()
        await err.close()
        await consumer.close()
        await client.close()
        if again is not None:
            again.stop()


async def test_storage_briefly_away_behind_a_broker_ends_no_consumer_stream(
    start_broker: StartBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=CONSUMER_LOG)
    # Given a broker on a Redis server that keeps its data across a restart
    redis = RedisServer(require_binary("redis-server"), tmp_path / "redis", persistent=True)
    redis.root.mkdir()
    redis.start()
    try:
        broker = start_broker(redis.url)
        async with Client(broker.address) as client:
            await Admin(client).create_topic("outage")
            # and a consumer holding a delivery
            await produce_one(client, "outage", now_ms(), b"x", id="held")
            async with Consumer(client, "outage", consumer_id="c", lease_ms=LEASE_MS) as consumer:
                held = await consumer.receive(RESUME_S)
                assert held is not None and held.id == "held"
                # When the Redis server goes away, and the consumer acks meanwhile
                redis.kill()
                # Then the ack is refused as storage unavailable (it may or may not
                # have been applied), not lost with a broken stream
                with pytest.raises(StorageUnavailable, match="may or may not"):
                    await held.ack(confirm=True)
                # When Redis is back and a message falls due
                redis.start()
                await produce_one(client, "outage", now_ms(), b"x", id="after")
                # Then the consumer gets it, and the refused one again after its lease
                got: dict[str, int] = {}
                while set(got) != {"after", "held"}:
                    d = await consumer.receive(RESUME_S)
                    assert d is not None
                    got[d.id] = d.deliveries
                    await d.ack()
                assert got["held"] == 2
                # and its stream was never broken: it never had to reconnect
                moved = [r.getMessage() for r in caplog.records if r.name == CONSUMER_LOG]
                assert moved == [], moved
    finally:
        redis.kill()
