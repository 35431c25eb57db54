"""Writing a DataFrame on the timeline: everything lands once, re-runs and
retried tasks change nothing, a broker lost mid-write loses nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from tests.e2e.broker_process import BrokerProcess
from tests.redis_server import RedisServer
from tests.spark.conftest import create_topic
from tests.spark.support import counts, now_ms, scan, write, write_parquet

ROWS = 100_000


def test_parquet_rows_land_once_and_a_rerun_reports_duplicates(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # given 100k rows in Parquet, due within the next hours
    topic = create_topic(broker.address, topic_name)
    first = now_ms() + 3_600_000
    write_parquet(tmp_path / "in", ROWS, first)
    df = spark.read.parquet(str(tmp_path / "in"))

    # when they are written
    totals = write(df, tmp_path / "s1.json", broker=broker.address, topic=topic)

    # then every row is on the timeline with its timestamp and payload
    assert (totals.rows, totals.accepted, totals.duplicate, totals.rejected) == (ROWS, ROWS, 0, 0)
    stored = scan(broker.address, topic)
    assert len(stored) == ROWS
    for i in (0, 1, 4_242, ROWS // 2, ROWS - 1):
        m = stored[f"m{i}"].message
        assert (m.timestamp, m.payload, m.version) == (first + i, f"p{i}".encode(), 1)
    assert all(int(id[1:]) + first == info.message.timestamp for id, info in stored.items())

    # when the same write runs again
    again = write(df, tmp_path / "s2.json", broker=broker.address, topic=topic)

    # then it reports 100k duplicates and changes nothing
    assert (again.accepted, again.duplicate, again.rejected) == (0, ROWS, 0)
    assert counts(broker.address, topic) == (ROWS, 0, 0, 0)
    assert all(info.message.version == 1 for info in scan(broker.address, topic).values())


def test_a_task_that_fails_halfway_and_is_retried_schedules_each_row_once(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # given 40k rows in 2 partitions, due now, ids derived from (user, campaign)
    topic = create_topic(broker.address, topic_name, lease_ms=60_000)
    now = now_ms()
    rows = 40_000
    df = spark.range(0, rows, 1, 2).selectExpr(
        "id as n",
        "concat('u', id) as user",
        "'spring' as campaign",
        f"{now} - 1000 + id % 500 as timestamp_ms",
        "concat('hello ', id) as payload",
    )
    dies = _dies_halfway_once(broker.address, topic, tmp_path / "seen")
    flaky = df.withColumn("payload", dies("n", "payload"))

    # when partition 0 dies halfway on its first attempt and Spark retries it
    totals = write(
        flaky,
        tmp_path / "s.json",
        broker=broker.address,
        topic=topic,
        keyColumns="user,campaign",
        batchSize="2000",
    )

    # then the rows before the failing one were sent while Spark computed it
    assert (tmp_path / "seen").read_text() == "True"
    # and the retry found the first attempt's rows as duplicates
    assert totals.rows == rows and totals.rejected == 0
    assert totals.accepted + totals.duplicate == rows and totals.duplicate > 0
    # and every row is on the timeline once, and is delivered once
    assert sum(counts(broker.address, topic)) == rows
    delivered = asyncio.run(_consume_all(broker.address, topic, rows))
    assert len(delivered) == rows and len(set(delivered)) == rows
    assert counts(broker.address, topic) == (0, 0, 0, 0)


def _dies_halfway_once(address: str, topic: str, seen: Path) -> Any:
    """A UDF passing payloads on; partition 0's first attempt dies at row 10,000 (of
    its 20,000), once some of its own rows before it are on the timeline (so the
    retry meets them again), and writes to ``seen`` whether they were. Partition 1's
    rows do not count: it runs at the same time, and may be the only one to have
    written."""
    from pyspark import TaskContext
    from pyspark.sql.functions import udf

    def check(n: int, payload: str) -> str:
        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and n == 10_000:
            deadline = time.monotonic() + 30
            while not _any_of_rows_below(address, topic, 10_000) and time.monotonic() < deadline:
                time.sleep(0.05)  # the writer, in another process, sends the rows before
            seen.write_text(str(_any_of_rows_below(address, topic, 10_000)))
            raise RuntimeError("injected: the task dies halfway through its partition")
        return payload

    return udf(check, "string", useArrow=False)


def _any_of_rows_below(address: str, topic: str, n: int) -> bool:
    """Whether a row numbered under ``n`` (its payload says ``hello <n>``) is stored."""
    if sum(counts(address, topic)) == 0:
        return False
    return any(int(info.message.payload.split()[1]) < n for info in scan(address, topic).values())


async def _consume_all(address: str, topic: str, rows: int) -> list[str]:
    ids: list[str] = []
    async with Client(address) as client, Consumer(client, topic) as consumer:
        async for delivery in consumer:
            ids.append(delivery.id)
            await delivery.ack()
            if len(ids) == rows:
                break
        await consumer.flush()
    return ids


def test_a_broker_killed_mid_write_loses_and_doubles_nothing(
    spark: Any, start_broker: Any, redis_server: RedisServer, topic_name: str, tmp_path: Path
) -> None:
    # given two brokers on one Redis, and 60k rows
    doomed, survivor = start_broker(redis_server.url), start_broker(redis_server.url)
    topic = create_topic(survivor.address, topic_name)
    rows = 60_000
    df = spark.range(0, rows, 1, 2).selectExpr(
        "concat('m', id) as id", f"{now_ms() + 600_000} + id as timestamp_ms", "'x' as payload"
    )
    killed = threading.Event()

    def kill_once_messages_arrive() -> None:
        # Spark runs on the test's thread (a data source is registered per thread).
        while sum(counts(survivor.address, topic)) == 0:
            pass  # polls the storage through the broker that stays
        doomed.kill()
        killed.set()

    killer = threading.Thread(target=kill_once_messages_arrive, daemon=True)
    killer.start()

    # when the first broker of the list is killed once messages arrive
    totals = write(
        df,
        tmp_path / "s.json",
        broker=f"{doomed.address},{survivor.address}",
        topic=topic,
        batchSize="1000",
        maxInFlight="4",
    )

    # then the job completes, every row once
    assert killed.is_set() and not doomed.alive
    assert totals.rows == rows and totals.rejected == 0
    assert totals.accepted + totals.duplicate == rows
    stored = scan(survivor.address, topic)
    assert sorted(stored) == sorted(f"m{i}" for i in range(rows))
    assert all(info.message.version == 1 for info in stored.values())
