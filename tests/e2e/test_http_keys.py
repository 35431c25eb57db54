"""A message's key and headers over HTTP, against a broker process with --http
on memory: produce (one and a batch) takes them, the message reads give them
back, the OpenAPI document says so; a bad one is a problem naming the field,
and nothing of its request is stored."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.broker_process import BrokerProcess

FAR = 2_000_000_000_000  # 2033: waiting, never due in a test
TRACE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}


@pytest.fixture(scope="module")
def http_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    log = tmp_path_factory.mktemp("http-keys") / "broker.log"
    process = BrokerProcess("memory://", log, args=["--http", "127.0.0.1:0"]).start()
    try:
        yield process
    finally:
        assert process.stop() == 0


class Http:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as refused:
            return refused.code, json.load(refused)


@pytest.fixture
def http(http_broker: BrokerProcess, topic_name: str) -> Http:
    api = Http(http_broker.http_url)
    status, body = api.call("POST", "/v1/topics", {"name": topic_name})
    assert status == 201, body
    return api


def test_produce_one_with_key_and_headers_then_get_gives_them_back(
    http: Http, topic_name: str
) -> None:
    # given a message produced with a key and headers
    sent = {"id": "a", "timestamp_ms": FAR, "payload": "x", "key": "tenant-é", "headers": TRACE}
    assert http.call("POST", f"/v1/topics/{topic_name}/messages", sent)[0] == 201
    # when it is read, then its key and headers are in the answer
    status, got = http.call("GET", f"/v1/topics/{topic_name}/messages/a")
    assert status == 200
    assert (got["key"], got["headers"]) == ("tenant-é", TRACE)
    # and a message without them reads as an empty key and no headers
    plain = {"id": "b", "timestamp_ms": FAR, "payload": "y"}
    assert http.call("POST", f"/v1/topics/{topic_name}/messages", plain)[0] == 201
    _, got = http.call("GET", f"/v1/topics/{topic_name}/messages/b")
    assert (got["key"], got["headers"]) == ("", {})


def test_a_batch_carries_each_message_s_key_and_headers(http: Http, topic_name: str) -> None:
    batch = {
        "messages": [
            {"id": "m1", "timestamp_ms": FAR, "key": "k1", "headers": {"a": "1"}},
            {"id": "m2", "timestamp_ms": FAR + 1, "payload": "p"},
            {"id": "m3", "timestamp_ms": FAR + 2, "key": "k3"},
        ]
    }
    status, answer = http.call("POST", f"/v1/topics/{topic_name}/batches", batch)
    assert status == 200 and answer["rejections"] == [], answer
    # the by-due listing shows each one's
    _, page = http.call("GET", f"/v1/topics/{topic_name}/timeline")
    shown = {m["id"]: (m["key"], m["headers"]) for m in page["messages"]}
    assert shown == {"m1": ("k1", {"a": "1"}), "m2": ("", {}), "m3": ("k3", {})}


BAD = [
    (
        {"key": "k" * 257},
        "body.messages[0].key: a message key is at most 256 bytes of UTF-8, not 257",
    ),
    ({"key": "a\u0007b"}, "body.messages[0].key: a message key may not hold control characters"),
    ({"key": 7}, "body.messages[0].key must be a string"),
    (
        {"headers": {f"h{i}": "v" for i in range(65)}},
        "body.messages[0].headers: a message has at most 64 headers, not 65",
    ),
    (
        {"headers": {"big": "v" * 9 * 1024}},
        "body.messages[0].headers: a message's headers are at most 8192 bytes in all, not 9219",
    ),
    (
        {"headers": {"bad name": "v"}},
        "body.messages[0].headers: header name 'bad name' is not an HTTP token",
    ),
    ({"headers": {"a": 1}}, "body.messages[0].headers: header names and values are strings"),
    ({"headers": ["a"]}, "body.messages[0].headers must be a JSON object of strings"),
]


@pytest.mark.parametrize(("fields", "why"), BAD)
def test_a_bad_key_or_headers_is_a_problem_naming_the_field(
    http: Http, topic_name: str, fields: dict[str, Any], why: str
) -> None:
    # when one message with a bad key or headers is produced
    status, problem = http.call(
        "POST", f"/v1/topics/{topic_name}/messages", {"id": "bad", "timestamp_ms": FAR, **fields}
    )
    # then it is a 400 problem that names the field, and nothing is stored
    assert (status, problem["code"], problem["detail"]) == (400, "INVALID_ARGUMENT", why)
    assert http.call("GET", f"/v1/topics/{topic_name}/messages/bad")[0] == 404


def test_a_bad_key_in_a_batch_refuses_the_batch_naming_the_message(
    http: Http, topic_name: str
) -> None:
    batch = {
        "messages": [
            {"id": "fine", "timestamp_ms": FAR, "key": "k"},
            {"id": "bad", "timestamp_ms": FAR, "key": "k" * 300},
        ]
    }
    status, problem = http.call("POST", f"/v1/topics/{topic_name}/batches", batch)
    assert status == 400
    assert problem["detail"].startswith("body.messages[1].key: a message key is at most 256")
    for mid in ("fine", "bad"):
        assert http.call("GET", f"/v1/topics/{topic_name}/messages/{mid}")[0] == 404


def test_the_openapi_document_shows_key_and_headers(http_broker: BrokerProcess) -> None:
    with urllib.request.urlopen(http_broker.http_url + "/openapi.json", timeout=10) as answer:
        doc = json.load(answer)
    read = doc["paths"]["/v1/topics/{topic}/messages/{id}"]["get"]["responses"]["200"]
    message = read["content"]["application/json"]["schema"]
    message = _resolve(doc, message)
    assert message["properties"]["key"] == {"type": "string"}
    assert message["properties"]["headers"] == {
        "type": "object",
        "additionalProperties": {"type": "string"},
    }
    produce = doc["paths"]["/v1/topics/{topic}/messages"]["post"]["requestBody"]
    new = _resolve(doc, produce["content"]["application/json"]["schema"])
    assert new["properties"]["key"]["type"] == "string"
    assert new["properties"]["headers"]["additionalProperties"] == {"type": "string"}


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A schema, its $ref followed."""
    while "$ref" in schema:
        node: Any = doc
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def test_a_produce_body_keeps_refusing_unknown_fields(http: Http, topic_name: str) -> None:
    status, problem = http.call(
        "POST", f"/v1/topics/{topic_name}/messages", {"timestamp_ms": FAR, "kee": "k"}
    )
    assert (status, problem["detail"]) == (400, "body.messages[0]: unknown field 'kee'")
