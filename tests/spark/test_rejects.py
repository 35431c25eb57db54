"""Bad rows never fail silently and never stop the good ones: each goes to the
rejects output with its reason, and maxRejects fails the job past a limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.broker_process import BrokerProcess
from tests.spark.conftest import create_topic
from tests.spark.support import now_ms, reasons, rejects, scan, write

SCHEMA = "case string, id string, user string, timestamp_ms long, payload string, topic string"


def given_rows(small: str, big: str) -> list[tuple[Any, ...]]:
    """Good rows for two topics (``small`` takes payloads up to 1,000 bytes), and
    one bad row of each kind."""
    at = now_ms() + 3_600_000
    good = [(f"good {i}", f"a{i}", None, at + i, f"pa{i}", small) for i in range(50)]
    good += [(f"good b{i}", f"b{i}", None, at + i, f"pb{i}", big) for i in range(50)]
    good += [(f"keyed {i}", None, f"user-{i}", at, "hi", small) for i in range(10)]
    bad = [
        ("null time", "x1", None, None, "p", small),
        ("before 1970", "x2", None, -5, "p", small),
        ("in seconds", "x7", None, at // 1000, "p", small),
        ("after 9999", "x3", None, 10**15, "p", small),
        ("oversized payload", "x4", None, at, "x" * 2000, small),
        ("id with NUL", "bad\x00id", None, at, "p", small),
        ("id too long", "i" * 300, None, at, "p", big),
        ("unknown topic", "x5", None, at, "p", "no-such-topic-anywhere"),
        ("null topic", "x6", None, at, "p", None),
        ("no id, no keys", None, None, at, "p", big),
    ]
    return good + bad


def test_every_kind_of_bad_row_lands_in_rejects_and_good_rows_are_scheduled(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # given two topics and a DataFrame with good rows and bad rows of every kind
    small = create_topic(broker.address, f"{topic_name}-s", max_payload_bytes=1000)
    big = create_topic(broker.address, f"{topic_name}-b")
    df = spark.createDataFrame(given_rows(small, big), SCHEMA)

    # when it is written with a rejects path
    out = tmp_path / "rejects"
    totals = write(
        df,
        tmp_path / "s.json",
        broker=broker.address,
        topicColumn="topic",
        keyColumns="user",
        rejectsPath=str(out),
    )

    # then each bad row is in the rejects output with its reason
    assert (totals.rows, totals.accepted, totals.rejected) == (120, 110, 10)
    found = rejects(out)
    why = reasons(found)
    assert sorted(why) == sorted(
        [
            "null time",
            "before 1970",
            "in seconds",
            "after 9999",
            "oversized payload",
            "id with NUL",
            "id too long",
            "unknown topic",
            "null topic",
            "no id, no keys",
        ]
    )
    assert "null" in why["null time"]
    assert "2001-09-09" in why["before 1970"] and "9999" in why["after 9999"]
    assert "not seconds" in why["in seconds"]
    assert "1000" in why["oversized payload"]
    assert "NUL" in why["id with NUL"] and "256 bytes" in why["id too long"]
    assert "unknown topic" in why["unknown topic"] and "null" in why["null topic"]
    assert "no id" in why["no id, no keys"]
    assert not (out / "_attempts").exists()
    # and every good row is scheduled
    stored_small = scan(broker.address, small)
    assert len(stored_small) == 60 and len(scan(broker.address, big)) == 50
    assert stored_small["a7"].message.payload == b"pa7"
    assert sum(id.startswith("k-") for id in stored_small) == 10


def test_max_rejects_fails_the_job_past_the_limit(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    small = create_topic(broker.address, f"{topic_name}-s", max_payload_bytes=1000)
    big = create_topic(broker.address, f"{topic_name}-b")
    df = spark.createDataFrame(given_rows(small, big), SCHEMA)
    with pytest.raises(Exception, match="maxRejects=3"):
        write(
            df,
            tmp_path / "s.json",
            broker=broker.address,
            topicColumn="topic",
            keyColumns="user",
            maxRejects="3",
        )
