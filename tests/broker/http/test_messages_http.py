"""Messages over HTTP mean what they mean over gRPC: versions, dedup by id,
bounds, one clock; the two surfaces see the same messages.

Given a broker with --http, when messages are produced, read, moved and
cancelled over HTTP, then the answers carry the versions gRPC gives, and a
stale or bad request is refused with a problem and changes nothing.
"""

from __future__ import annotations

import base64

from dejaq.driver import Admin, Client
from tests.broker.http.conftest import Api

FAR = 2_000_000_000_000  # 2033: waiting, never due in a test


async def _topic(api: Api, name: str = "jobs", **settings: object) -> None:
    answer = await api.call("POST", "/v1/topics", {"name": name, "settings": settings})
    assert answer.status == 201, answer.body


async def test_produce_get_move_cancel_by_id_with_versions(api: Api) -> None:
    await _topic(api)
    sent = await api.call(
        "POST", "/v1/topics/jobs/messages", {"id": "a", "timestamp_ms": FAR, "payload": "hi"}
    )
    assert (sent.status, sent.body) == (201, {"id": "a", "status": "ACCEPTED"})

    got = await api.call("GET", "/v1/topics/jobs/messages/a")
    assert got.body["payload"] == "hi"
    assert (got.body["version"], got.body["state"], got.body["timestamp_ms"]) == (1, "waiting", FAR)

    moved = await api.call(
        "POST", "/v1/topics/jobs/messages/a/move", {"version": 1, "timestamp_ms": FAR + 5}
    )
    assert moved.body == {"id": "a", "version": 2, "timestamp_ms": FAR + 5}

    stale = await api.call("POST", "/v1/topics/jobs/messages/a/cancel", {"version": 1})
    assert (stale.status, stale.content_type) == (409, "application/problem+json")
    assert (stale.body["code"], stale.body["kind"]) == ("ABORTED", "StaleVersion")
    assert (await api.call("GET", "/v1/topics/jobs/messages/a")).body["version"] == 2

    cancelled = await api.call("POST", "/v1/topics/jobs/messages/a/cancel", {"version": 2})
    assert cancelled.body["version"] == 0
    gone = await api.call("GET", "/v1/topics/jobs/messages/a")
    assert (gone.status, gone.body["code"]) == (404, "NOT_FOUND")


async def test_a_second_produce_of_an_id_is_a_duplicate_even_after_cancel(api: Api) -> None:
    await _topic(api)
    body = {"id": "once", "timestamp_ms": FAR, "payload": "x"}
    assert (await api.call("POST", "/v1/topics/jobs/messages", body)).status == 201
    await api.call("POST", "/v1/topics/jobs/messages/once/cancel", {"version": 1})
    again = await api.call("POST", "/v1/topics/jobs/messages", body)
    assert (again.status, again.body["status"]) == (200, "DUPLICATE")


async def test_bytes_travel_as_base64_and_text_as_text(api: Api) -> None:
    await _topic(api)
    raw = b"\xff\x00binary"
    encoded = base64.b64encode(raw).decode()
    body = {"id": "b", "timestamp_ms": FAR, "payload_base64": encoded}
    await api.call("POST", "/v1/topics/jobs/messages", body)
    got = await api.call("GET", "/v1/topics/jobs/messages/b")
    assert got.body["payload_base64"] == encoded and "payload" not in got.body
    async with Client(api.grpc_address, tls=False, token="") as client:
        info = await Admin(client).get("jobs", "b")
    assert info.message.payload == raw  # the gRPC surface reads the same bytes


async def test_a_batch_is_answered_message_by_message(api: Api) -> None:
    await _topic(api)
    batch = {
        "messages": [
            {"id": "ok", "timestamp_ms": FAR, "payload": "1"},
            {"id": "bad", "timestamp_ms": -1, "payload": "2"},
            {"timestamp_ms": FAR},
        ]
    }
    answer = await api.call("POST", "/v1/topics/jobs/batches", batch)
    statuses = [r["status"] for r in answer.body["results"]]
    assert statuses == ["ACCEPTED", "REJECTED", "ACCEPTED"]
    assert answer.body["rejections"][0]["index"] == 1
    assert answer.body["rejections"][0]["code"] == "INVALID_ARGUMENT"
    generated = answer.body["results"][2]["id"]
    assert (await api.call("GET", f"/v1/topics/jobs/messages/{generated}")).status == 200
    assert (await api.call("GET", "/v1/topics/jobs/messages/bad")).status == 404


async def test_a_batch_over_the_frame_limit_is_refused_whole(serve: object) -> None:
    api = await serve(max_produce_messages=3)  # type: ignore[operator]
    await _topic(api)
    batch = {"messages": [{"id": f"m{i}", "timestamp_ms": FAR} for i in range(4)]}
    answer = await api.call("POST", "/v1/topics/jobs/batches", batch)
    assert (answer.status, answer.body["code"]) == (400, "INVALID_ARGUMENT")
    assert (await api.call("GET", "/v1/topics/jobs/messages/m0")).status == 404


async def test_ids_with_a_slash_are_reached_percent_encoded(api: Api) -> None:
    await _topic(api)
    await api.call("POST", "/v1/topics/jobs/messages", {"id": "user/7", "timestamp_ms": FAR})
    got = await api.call("GET", "/v1/topics/jobs/messages/user%2F7")
    assert (got.status, got.body["id"]) == (200, "user/7")


async def test_a_topic_is_scanned_a_bucket_page_at_a_time(api: Api) -> None:
    await _topic(api, buckets=1)
    batch = {"messages": [{"id": f"m{i}", "timestamp_ms": FAR + i} for i in range(5)]}
    await api.call("POST", "/v1/topics/jobs/batches", batch)
    seen: list[str] = []
    after = ""
    while True:
        page = await api.call("GET", f"/v1/topics/jobs/buckets/0/messages?limit=2&after_id={after}")
        seen += [m["id"] for m in page.body["messages"]]
        if page.body["done"]:
            break
        after = page.body["next_after_id"]
    assert seen == [f"m{i}" for i in range(5)]
    out = await api.call("GET", "/v1/topics/jobs/buckets/1/messages")
    assert (out.status, out.body["code"]) == (400, "INVALID_ARGUMENT")
