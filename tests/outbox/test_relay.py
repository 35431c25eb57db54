"""The relay: moves and cancels in order, parked rows, several relays on one
outbox, and a relay killed mid-batch."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from dejaq import outbox
from dejaq.core.clock import now_ms
from dejaq.driver import Admin, Client
from dejaq.outbox.driver_handoff import DriverHandOff
from dejaq.outbox.relay import Relay, RelayMetrics
from tests.outbox.conftest import HOUR_MS, TOPIC, drain, on_topic

pytestmark = pytest.mark.timeout(120)


def schedule_many(url: str, n: int, prefix: str, per_tx: int = 50) -> list[str]:
    """``n`` messages due in an hour, ``per_tx`` a transaction; their ids."""
    ids: list[str] = []
    with psycopg.connect(url) as conn:
        for start in range(0, n, per_tx):
            with conn.transaction():
                for i in range(start, min(n, start + per_tx)):
                    ids.append(
                        outbox.schedule(conn, TOPIC, b"x", delay_ms=HOUR_MS, id=f"{prefix}{i}")
                    )
    return ids


async def wait_for(condition, what: str, timeout_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_move_and_cancel_apply_in_the_order_written(app_db: str, broker: Client) -> None:
    later = now_ms() + 2 * HOUR_MS
    # Given a message scheduled and, in a later transaction, moved; and another
    # scheduled and cancelled in one transaction
    with psycopg.connect(app_db) as conn:
        with conn.transaction():
            moved = outbox.schedule(conn, TOPIC, b"m", delay_ms=HOUR_MS)
        with conn.transaction():
            outbox.move(conn, TOPIC, moved, at_ms=later)
        with conn.transaction():
            gone = outbox.schedule(conn, TOPIC, b"c", delay_ms=HOUR_MS)
            outbox.cancel(conn, TOPIC, gone)
    # When the relay runs
    await drain(app_db, broker)
    # Then the first is due at its new time and the second is not there
    assert (await Admin(broker).get(TOPIC, moved)).message.timestamp == later
    assert not await on_topic(broker, gone)
    assert outbox.status(app_db).waiting == 0


async def test_a_rolled_back_cancel_leaves_the_message(app_db: str, broker: Client) -> None:
    # Given a message relayed, then a cancel of it rolled back
    with psycopg.connect(app_db) as conn:
        with conn.transaction():
            kept = outbox.schedule(conn, TOPIC, b"k", delay_ms=HOUR_MS)
        await drain(app_db, broker)
        tx = conn.transaction()
        with pytest.raises(ZeroDivisionError), tx:
            outbox.cancel(conn, TOPIC, kept)
            _ = 1 / 0
    # When the relay runs again; then the message is still there
    await drain(app_db, broker)
    assert await on_topic(broker, kept)


async def test_a_parked_row_does_not_block_the_rows_behind_it(app_db: str, broker: Client) -> None:
    # Given a row for a topic that does not exist, written before two good ones
    with psycopg.connect(app_db) as conn:
        with conn.transaction():
            lost = outbox.schedule(conn, "no-such-topic", b"x", delay_ms=HOUR_MS)
        with conn.transaction():
            first = outbox.schedule(conn, TOPIC, b"1", delay_ms=HOUR_MS)
            second = outbox.schedule(conn, TOPIC, b"2", delay_ms=HOUR_MS)
    # When the relay runs
    metrics = RelayMetrics()
    relay = Relay(app_db, DriverHandOff(broker), metrics=metrics)
    try:
        await relay.drain()
    finally:
        await relay.close()
    # Then the good rows are on the topic, and the bad one parked with its reason
    assert await on_topic(broker, first) and await on_topic(broker, second)
    found = outbox.status(app_db)
    assert (found.waiting, found.parked) == (0, 1)
    (parked,) = found.parked_rows
    assert (parked.topic, parked.id) == ("no-such-topic", lost)
    assert "NotFound" in parked.reason and "no-such-topic" in parked.reason
    assert metrics.parked.labels(relay.name)._value.get() == 1


class FailsOnce(DriverHandOff):
    """A hand-over whose first batch meets an unreachable broker."""

    failed = False

    async def send(self, topic: str, rows):  # type: ignore[no-untyped-def]
        if not self.failed:
            self.failed = True
            raise ConnectionError("no broker")
        return await super().send(topic, rows)


async def test_a_failed_hand_over_leaves_its_rows_for_the_next_batch(
    app_db: str, broker: Client
) -> None:
    # Given two committed rows, and a relay whose first hand-over fails
    ids = schedule_many(app_db, 2, "f-")
    failing = Relay(app_db, FailsOnce(broker))
    try:
        # When it claims them and the hand-over raises
        with pytest.raises(ConnectionError):
            await failing.relay_once()
        # Then nothing was deleted and nothing stays locked: another relay
        # relays them while the first is still connected, whose next claim
        # on the same connection finds nothing left
        assert outbox.status(app_db).waiting == 2
        assert await drain(app_db, broker) == 2
        assert await failing.relay_once() == 0
    finally:
        await failing.close()
    assert outbox.status(app_db).waiting == 0
    assert [await on_topic(broker, i) for i in ids] == [True, True]


async def test_three_relays_share_an_outbox(app_db: str, broker: Client) -> None:
    # Given 3 relays on one outbox, and rows committed while they run
    metrics = RelayMetrics()
    relays = [
        Relay(app_db, DriverHandOff(broker), batch=20, poll_ms=50, metrics=metrics)
        for _ in range(3)
    ]
    stop = asyncio.Event()
    running = [asyncio.create_task(r.run(stop)) for r in relays]
    ids = await asyncio.to_thread(schedule_many, app_db, 600, "shared-", 10)

    async def empty() -> bool:
        return outbox.status(app_db).waiting == 0

    # When they have drained it
    await wait_for(empty, "the outbox to empty")
    stop.set()
    await asyncio.gather(*running)
    # Then every row was handed over and deleted once: by one relay, none lost
    relayed = metrics.relayed.labels(relays[0].name)._value.get()
    assert relayed == 600
    info = await Admin(broker).describe_topic(TOPIC)
    assert info.counts.waiting == 600
    for msg_id in ids[::37]:
        assert await on_topic(broker, msg_id)
    assert outbox.status(app_db).parked == 0


def relay_process(url: str, broker: Client) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dejaq.driver.cli.main",
            "outbox",
            "relay",
            url,
            "--broker",
            broker.address,
            "--batch",
            "25",
            "--poll-ms",
            "50",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def test_a_relay_killed_mid_batch_loses_nothing(app_db: str, broker: Client) -> None:
    # Given 1000 committed rows and a relay process working through them
    ids = schedule_many(app_db, 1000, "k-")
    first = relay_process(app_db, broker)

    async def some_relayed() -> bool:
        return outbox.status(app_db).waiting < 900

    # When it is killed with SIGKILL part way, and another relay takes over
    await wait_for(some_relayed, "the relay to start")
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    left = outbox.status(app_db).waiting
    second = relay_process(app_db, broker)
    try:

        async def empty() -> bool:
            return outbox.status(app_db).waiting == 0

        await wait_for(empty, "the outbox to empty")
    finally:
        second.terminate()
        _, err = second.communicate(timeout=30)
    # Then every committed row is on the topic once: none lost, duplicates absorbed by id
    assert left > 0
    assert second.returncode == 0, err.decode()
    info = await Admin(broker).describe_topic(TOPIC)
    assert info.counts.waiting == 1000
    missing = [i for i in ids if not await on_topic(broker, i)]
    assert missing == []
