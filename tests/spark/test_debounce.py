"""A write with onDuplicate replaces or extends the waiting messages of its ids,
and says how many; a mode there is not is refused by name before any row goes."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import pytest

from dejaq.core.errors import InvalidArgument
from dejaq.driver.cli.spark_cmd import job_of
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from dejaq.driver.spark.options import write_options
from tests.e2e.broker_process import BrokerProcess
from tests.spark.conftest import create_topic
from tests.spark.support import now_ms, scan, write


def test_a_write_with_replace_replaces_each_waiting_message(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # given ten messages waiting
    topic = create_topic(broker.address, topic_name)
    first = now_ms() + 3_600_000
    rows = [(f"m{i}", first + i, f"v1-{i}") for i in range(10)]
    asyncio.run(_produce(broker.address, topic, rows))
    # when rows of their ids are written, a minute later with new payloads, replacing
    again = [(id, ts + 60_000, p.replace("v1", "v2")) for id, ts, p in rows]
    df = spark.createDataFrame(again, "id string, timestamp_ms long, payload string")
    totals = write(
        df, tmp_path / "s.json", broker=broker.address, topic=topic, onDuplicate="replace"
    )
    # then each was replaced, and the totals say so
    assert (totals.accepted, totals.duplicate, totals.replaced) == (0, 0, 10)
    assert "replaced 10" in totals.line()
    stored = scan(broker.address, topic)
    got = {
        id: (i.message.timestamp, i.message.payload, i.message.version) for id, i in stored.items()
    }
    assert got == {id: (ts, p.encode(), 2) for id, ts, p in again}


async def _produce(address: str, topic: str, rows: list[tuple[str, int, str]]) -> None:
    async with Client(address) as client, Producer(client, topic) as producer:
        await producer.send_batch([Outgoing(p.encode(), ts, id) for id, ts, p in rows])


def test_on_duplicate_is_checked_and_passed_on_by_the_command() -> None:
    with pytest.raises(InvalidArgument, match="'onDuplicate' is keep, replace or extend"):
        write_options({"broker": "b:1", "topic": "t", "onDuplicate": "merge"})
    assert write_options({"broker": "b:1", "topic": "t", "ONDUPLICATE": "Extend"}).on_duplicate == (
        "extend"
    )
    flags = {
        f: None
        for f in (
            "id_column",
            "time_column",
            "payload_column",
            "key_columns",
            "topic_column",
            "max_deliveries_column",
            "expires_at_column",
            "message_key_column",
            "headers_column",
            "rejects",
            "max_rejects",
            "batch_size",
        )
    }
    args = argparse.Namespace(
        broker="b:1",
        topic="t",
        input="in",
        format=None,
        master="local[1]",
        spark_ui=False,
        on_duplicate="replace",
        **flags,
    )
    assert job_of(args).options["onDuplicate"] == "replace"
