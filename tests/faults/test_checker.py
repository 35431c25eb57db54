"""The fault run's checker, on journals written by hand: it passes a clean run
and names each broken promise."""

from __future__ import annotations

from typing import Any

from tests.faults.checker import Report, check
from tests.faults.journal import Record
from tests.faults.workers import AT_LEAST_ONCE, AT_MOST_ONCE

LEASE = 1000


def send(mid: str, due: int, topic: str = AT_LEAST_ONCE, status: str = "accepted") -> list[Record]:
    return [
        {"k": "send", "topic": topic, "id": mid, "due": due, "at": due - 500},
        {"k": "sent", "topic": topic, "id": mid, "status": status, "error": None},
    ]


def deliver(mid: str, consumer: str, version: int, recv: int, **kw: Any) -> Record:
    return {
        "k": "deliver",
        "topic": kw.get("topic", AT_LEAST_ONCE),
        "id": mid,
        "consumer": consumer,
        "broker": kw.get("broker", "b1"),
        "version": version,
        "deliveries": version,
        "due": kw.get("due", recv),
        "recv": recv,
        "lease_until": recv + LEASE,
    }


def ack(mid: str, consumer: str, version: int, at: int, ok: bool = True) -> Record:
    return {
        "k": "ack",
        "topic": AT_LEAST_ONCE,
        "id": mid,
        "consumer": consumer,
        "version": version,
        "ok": ok,
        "error": None if ok else "StaleVersion",
        "at": at,
    }


def test_a_clean_run_passes_and_counts_an_expired_lease_as_an_allowed_duplicate() -> None:
    # Given m1 delivered to c1, who froze past its lease; then to c2, who acked
    report = check(
        [
            *send("m1", 100),
            deliver("m1", "c1", 1, 110),
            {"k": "fault", "kind": "freeze_consumer", "target": "c1", "start": 120, "end": 2000},
            deliver("m1", "c2", 2, 1110),
            ack("m1", "c1", 1, 2100, ok=False),
            ack("m1", "c2", 2, 1120),
            *send("a1", 100, AT_MOST_ONCE),
            deliver("a1", "c2", 1, 100, topic=AT_MOST_ONCE),
        ]
    )
    assert report.violations == []
    assert report.duplicates == {"lease expired (consumer frozen)": 1}
    assert report.faults == {"freeze_consumer": 1}
    assert "duplicates  1: 1 lease expired (consumer frozen)" in report.tally()


def test_an_old_lease_read_late_by_a_thawed_consumer_is_no_second_holder() -> None:
    # Given m delivered (version 2) to c2 while c2 was frozen; its lease ran out,
    # c0 got version 3 and acked it; then c2 thawed and read its old delivery
    report = check(
        [
            *send("m", 100),
            {**deliver("m", "c2", 2, 3000), "lease_until": 1100},
            deliver("m", "c0", 3, 1105),
            ack("m", "c0", 3, 1150),
            ack("m", "c2", 2, 3010, ok=False),
        ]
    )
    assert report.violations == []
    assert sum(report.duplicates.values()) == 1


def violations(*records: Record | list[Record]) -> list[str]:
    flat: list[Record] = []
    for r in records:
        flat += r if isinstance(r, list) else [r]
    report: Report = check(flat)
    return [v.split(":")[0] for v in report.violations]


def test_each_broken_promise_is_named() -> None:
    assert violations(send("m", 100)) == ["acknowledged produce never delivered"]
    assert violations(send("m", 100), deliver("m", "c1", 1, 110)) == ["delivered, never acked"]
    assert violations(send("m", 100), deliver("m", "c1", 1, 99), ack("m", "c1", 1, 120)) == [
        "delivered before due"
    ]
    # a second holder while the first lease still ran
    assert violations(
        send("m", 100),
        deliver("m", "c1", 1, 110),
        deliver("m", "c2", 2, 500),
        ack("m", "c2", 2, 510),
    ) == ["held by two consumers at once"]
    # an ack confirmed, then the message again
    assert violations(
        send("m", 100),
        deliver("m", "c1", 1, 110),
        ack("m", "c1", 1, 120),
        deliver("m", "c2", 2, 5000),
        ack("m", "c2", 2, 5010),
    ) == ["delivered again after a confirmed ack"]
    assert violations(
        send("a", 100, AT_MOST_ONCE),
        deliver("a", "c1", 1, 110, topic=AT_MOST_ONCE),
        deliver("a", "c2", 2, 5000, topic=AT_MOST_ONCE),
    ) == ["at-most-once delivered twice"]
    assert violations(send("m", 100, status="rejected")) == ["produce refused"]
    assert violations(send("m", 100, status="failed")) == ["produce failed after every retry"]
    assert violations(deliver("x", "c1", 1, 100), ack("x", "c1", 1, 110)) == [
        "delivered but never produced"
    ]


def test_an_at_most_once_message_lost_with_its_broker_is_allowed_and_counted() -> None:
    report = check(send("a", 100, AT_MOST_ONCE))
    assert report.violations == []
    assert report.at_most_once_undelivered == 1


def test_an_ack_whose_answer_was_lost_counts_when_the_message_is_gone() -> None:
    # Given m delivered, its ack sent, and its broker killed before answering
    records = [
        *send("m", 100),
        deliver("m", "c1", 1, 110),
        {**ack("m", "c1", 1, 150, ok=False), "error": "BrokerUnavailable"},
    ]
    # Then it is "never acked" while storage still holds it, and fine once gone
    assert check(records).never_acked == ["m"]
    report = check(records, gone=["m"])
    assert report.violations == [] and report.unconfirmed_acks == 1
