"""A payload over its topic's limit is 413 Content Too Large over HTTP.

Given a broker with --http and a topic whose max payload is 10 bytes, when
one message carries 11 bytes, then the answer is a 413 problem (code
INVALID_ARGUMENT, as on gRPC, kind PayloadTooLarge) and nothing is stored; in
a batch that message alone is rejected with that kind.
"""

from __future__ import annotations

from tests.broker.http.conftest import Api

FAR = 2_000_000_000_000


async def _topic(api: Api) -> None:
    body = {"name": "small", "settings": {"max_payload_bytes": 10}}
    assert (await api.call("POST", "/v1/topics", body)).status == 201


async def test_one_message_over_the_topic_s_max_payload_is_413(api: Api) -> None:
    # Given a topic of 10-byte payloads
    await _topic(api)
    # When a message of 11 bytes is produced
    refused = await api.call(
        "POST", "/v1/topics/small/messages", {"id": "big", "timestamp_ms": FAR, "payload": "x" * 11}
    )
    # Then it is a 413 problem saying why, and nothing is stored
    assert (refused.status, refused.content_type) == (413, "application/problem+json")
    assert (refused.body["code"], refused.body["kind"]) == ("INVALID_ARGUMENT", "PayloadTooLarge")
    assert refused.body["detail"] == "payload of 11 bytes is over the topic's 10"
    assert (await api.call("GET", "/v1/topics/small/messages/big")).status == 404
    # and one of 10 bytes is stored
    fits = await api.call(
        "POST", "/v1/topics/small/messages", {"id": "ok", "timestamp_ms": FAR, "payload": "x" * 10}
    )
    assert fits.status == 201


async def test_in_a_batch_the_message_over_the_limit_is_rejected_alone(api: Api) -> None:
    # Given a topic of 10-byte payloads
    await _topic(api)
    # When a batch carries one message of 11 bytes among good ones
    batch = {
        "messages": [
            {"id": "a", "timestamp_ms": FAR, "payload": "x"},
            {"id": "big", "timestamp_ms": FAR, "payload": "x" * 11},
        ]
    }
    answer = await api.call("POST", "/v1/topics/small/batches", batch)
    # Then the batch is answered, that message rejected with its kind
    assert answer.status == 200
    assert [r["status"] for r in answer.body["results"]] == ["ACCEPTED", "REJECTED"]
    [rejection] = answer.body["rejections"]
    assert (rejection["index"], rejection["code"], rejection["kind"]) == (
        1, "INVALID_ARGUMENT", "PayloadTooLarge",
    )  # fmt: skip


async def test_a_cron_entry_over_the_limit_is_413_too(api: Api) -> None:
    # Given a topic of 10-byte payloads
    await _topic(api)
    # When a cron entry of 11 bytes is added
    entry = {"id": "daily", "schedule": "0 9 * * *", "payload": "x" * 11}
    refused = await api.call("POST", "/v1/topics/small/cron", entry)
    # Then it is a 413 problem too
    assert (refused.status, refused.body["kind"]) == (413, "PayloadTooLarge")
