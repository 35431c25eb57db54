"""A message over HTTP may say when it is due as a delay from now.

Given a broker with --http, when a message gives ``delay_ms`` instead of
``timestamp_ms``, then it is due that long after the broker received it, by
the broker's clock; one that gives both, a negative delay, or a delay past
the latest due time is refused by name, and nothing is stored.
"""

from __future__ import annotations

import time

import pytest

from tests.broker.http.conftest import Api

HOUR_MS = 3_600_000
FAR = 2_000_000_000_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def _topic(api: Api) -> None:
    assert (await api.call("POST", "/v1/topics", {"name": "later"})).status == 201


async def test_a_delay_makes_a_message_due_that_long_from_now(api: Api) -> None:
    # Given a topic
    await _topic(api)
    # When a message is produced due in an hour, by delay
    before = _now_ms()
    sent = await api.call(
        "POST", "/v1/topics/later/messages", {"id": "d", "delay_ms": HOUR_MS, "payload": "x"}
    )
    after = _now_ms()
    # Then it is stored due an hour after it was received
    assert (sent.status, sent.body) == (201, {"id": "d", "status": "ACCEPTED"})
    got = await api.call("GET", "/v1/topics/later/messages/d")
    assert before + HOUR_MS <= got.body["timestamp_ms"] <= after + HOUR_MS
    assert got.body["state"] == "waiting"


async def test_a_batch_mixes_delays_and_times(api: Api) -> None:
    # Given a topic
    await _topic(api)
    # When a batch gives one message a time, one a delay and one a delay of 0
    before = _now_ms()
    batch = {
        "messages": [
            {"id": "at", "timestamp_ms": FAR},
            {"id": "in", "delay_ms": HOUR_MS},
            {"id": "now", "delay_ms": 0},
        ]
    }
    sent = await api.call("POST", "/v1/topics/later/batches", batch)
    after = _now_ms()
    # Then each is stored at its own time
    assert [r["status"] for r in sent.body["results"]] == ["ACCEPTED"] * 3
    times = {}
    for mid in ("at", "in", "now"):
        times[mid] = (await api.call("GET", f"/v1/topics/later/messages/{mid}")).body[
            "timestamp_ms"
        ]
    assert times["at"] == FAR
    assert before + HOUR_MS <= times["in"] <= after + HOUR_MS
    assert before <= times["now"] <= after


@pytest.mark.parametrize(
    ("message", "detail"),
    [
        (
            {"timestamp_ms": FAR, "delay_ms": HOUR_MS},
            "body.messages[0]: give timestamp_ms or delay_ms, not both",
        ),
        (
            {"delay_ms": -1},
            "body.messages[0].delay_ms must be an integer between 0 and 253402300799999",
        ),
        (
            {"delay_ms": 253_402_300_799_999},
            "body.messages[0].delay_ms: 253402300799999 ms from now is after 9999-12-31",
        ),
        ({"delay_ms": "1h"}, "body.messages[0].delay_ms must be an integer"),
        ({"payload": "x"}, "body.messages[0].timestamp_ms is missing (or give delay_ms)"),
    ],
)
async def test_a_bad_delay_is_refused_by_name_and_stores_nothing(
    api: Api, message: dict[str, object], detail: str
) -> None:
    # Given a topic
    await _topic(api)
    # When a message or a batch gives a bad delay
    one = await api.call("POST", "/v1/topics/later/messages", {"id": "bad", **message})
    batch = await api.call(
        "POST", "/v1/topics/later/batches", {"messages": [{"id": "bad", **message}]}
    )
    # Then both are refused by name
    for refused in (one, batch):
        assert (refused.status, refused.body["code"]) == (400, "INVALID_ARGUMENT")
        assert refused.body["detail"].startswith(detail), refused.body["detail"]
    # and nothing was stored
    gone = await api.call("GET", "/v1/topics/later/messages/bad")
    assert gone.status == 404
