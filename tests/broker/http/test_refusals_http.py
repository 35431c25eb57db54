"""No input crashes the broker, and a refusal changes nothing.

Given a broker with --http, when requests come with bodies that are not JSON,
values of the wrong type or range, unknown fields, oversized bodies, unknown
paths or methods, then each gets a problem (4xx) and the broker still serves.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.broker.http.conftest import Api, Serve

FAR = 2_000_000_000_000
SECONDS = (
    "timestamp 1795000000 is before 2001-09-09 (epoch ms 1000000000000): give epoch milliseconds"
)


@pytest.mark.parametrize(
    ("path", "raw", "detail"),
    [
        ("/v1/topics", b"{nope", "not JSON"),
        ("/v1/topics", b"[1, 2]", "must be a JSON object"),
        ("/v1/topics", b'{"name": "t", "settings": {"buckets": -1}}', "between 0"),
        ("/v1/topics", b'{"name": "t", "settings": {"buckets": true}}', "integer"),
        ("/v1/topics", b'{"name": "t", "colour": "red"}', "unknown field"),
        ("/v1/topics", b'{"name": "t", "settings": {"max_rate": NaN}}', "not JSON"),
        ("/v1/topics", b'{"name": "\\ud800"}', "not valid text"),
        ("/v1/topics", b"[" * 100_000, "not JSON"),
        ("/v1/topics/t/messages", b'{"timestamp_ms": 1.5}', "integer"),
        ("/v1/topics/t/messages", b'{"payload": "x"}', "timestamp_ms is missing"),
        ("/v1/topics/t/messages", b'{"timestamp_ms": 1, "payload_base64": "%%"}', "not base64"),
        ("/v1/topics/t/messages", b'{"id": "\\ud800", "timestamp_ms": 1}', "id is not valid text"),
        (
            "/v1/topics/t/batches",
            b'{"messages": [{"id": "\\udfff", "timestamp_ms": 1}]}',
            "id is not valid text",
        ),
        ("/v1/topics/t/batches", b'{"messages": {}}', "must be a list"),
        ("/v1/topics/t/batches", b'{"messages": [], "x": 1}', "one key"),
        ("/v1/topics/t/messages/a/move", b'{"version": "1"}', "integer"),
        # epoch seconds, refused by name rather than stored as January 1970
        ("/v1/topics/t/messages", b'{"timestamp_ms": 1795000000}', SECONDS),
        ("/v1/topics/t/messages/a/move", b'{"version": 1, "timestamp_ms": 1795000000}', SECONDS),
        # a misspelt field is named, its value never dropped
        ("/v1/topics/t/messages", b'{"timestamp_ms": 0, "payload_b64": "AP8="}', "'payload_b64'"),
        (
            "/v1/topics/t/batches",
            b'{"messages": [{"timestamp_ms": 0, "payload64": "AP8="}]}',
            "unknown field 'payload64'",
        ),
    ],
)
async def test_bad_bodies_are_refused_with_a_problem(
    api: Api, path: str, raw: bytes, detail: str
) -> None:
    await api.call("POST", "/v1/topics", {"name": "t"})
    await api.call("POST", "/v1/topics/t/messages", {"id": "a", "timestamp_ms": FAR})
    answer = await api.call("POST", path, raw=raw)
    assert (answer.status, answer.content_type) == (400, "application/problem+json")
    assert answer.body["code"] == "INVALID_ARGUMENT" and detail in answer.body["detail"]
    # Nothing changed: the message is as produced, and the broker serves on.
    got = await api.call("GET", "/v1/topics/t/messages/a")
    assert (got.body["version"], got.body["timestamp_ms"]) == (1, FAR)
    assert [t["name"] for t in (await api.call("GET", "/v1/topics")).body["topics"]] == ["t"]


async def test_a_batch_refuses_a_time_in_seconds_message_by_message(api: Api) -> None:
    # Given a batch whose second message is due in epoch seconds
    await api.call("POST", "/v1/topics", {"name": "t"})
    body = {
        "messages": [{"id": "ms", "timestamp_ms": FAR}, {"id": "s", "timestamp_ms": 1795000000}]
    }
    # When it is produced
    answer = await api.call("POST", "/v1/topics/t/batches", body)
    # Then the first is stored and the second refused, saying why
    assert [r["status"] for r in answer.body["results"]] == ["ACCEPTED", "REJECTED"]
    (rejection,) = answer.body["rejections"]
    assert rejection["index"] == 1 and rejection["reason"].startswith(SECONDS)
    assert (await api.call("GET", "/v1/topics/t/messages/s")).status == 404


@pytest.mark.parametrize(
    "query",
    ["limit=x", "limit=-1", "limit=99999999999", "limit=1&limit=2", "colour=red", "limit=²"],
)
async def test_bad_query_parameters_are_refused(api: Api, query: str) -> None:
    await api.call("POST", "/v1/topics", {"name": "t"})
    answer = await api.call("GET", f"/v1/topics/t/dead?{query}")
    assert (answer.status, answer.body["code"]) == (400, "INVALID_ARGUMENT")


async def test_unknown_paths_and_methods_get_problems(api: Api) -> None:
    missing = await api.call("GET", "/v1/nothing")
    assert (missing.status, missing.body["code"]) == (404, "NOT_FOUND")
    wrong = await api.call("PUT", "/v1/topics")
    assert (wrong.status, wrong.body["code"]) == (405, "UNIMPLEMENTED")
    assert "POST" in wrong.headers["Allow"]


async def test_a_body_over_the_limit_is_refused_unread(serve: Serve) -> None:
    api = await serve(max_produce_bytes=64 << 10)
    made = await api.call(
        "POST", "/v1/topics", {"name": "t", "settings": {"max_payload_bytes": 1000}}
    )
    assert made.status == 201, made.body
    huge = b'{"timestamp_ms": 1, "payload": "' + b"x" * (3 << 20) + b'"}'
    answer = await api.call("POST", "/v1/topics/t/messages", raw=huge)
    assert (answer.status, answer.body["code"]) == (413, "INVALID_ARGUMENT")
    described = await api.call("GET", "/v1/topics/t")
    assert described.body["counts"]["due"] == 0


async def test_a_request_http_cannot_parse_is_refused_in_one_quiet_line(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = api.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /v1/topics HTTP/1.1\r\nHost: x\r\nX-Bad: \x00\r\n\r\n")
    await writer.drain()
    status_line = await reader.readline()
    writer.close()
    await writer.wait_closed()
    assert status_line.split()[1] == b"400"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert (await api.call("GET", "/v1/topics")).status == 200
