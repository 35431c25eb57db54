"""A produce over HTTP may replace or extend the waiting message of its id.

Given a broker with --http, when a message (or a batch) says ``on_duplicate``,
then the waiting message of its id is replaced or moved and the answer says
so per message; a mode there is not is a 400 problem naming the field, and
nothing is stored.
"""

from __future__ import annotations

from tests.broker.http.conftest import Api

FAR = 2_000_000_000_000


async def _waiting(api: Api) -> None:
    assert (await api.call("POST", "/v1/topics", {"name": "digest"})).status == 201
    one = {"id": "d", "timestamp_ms": FAR, "payload": "v1"}
    assert (await api.call("POST", "/v1/topics/digest/messages", one)).status == 201


async def test_one_message_replaces_and_a_batch_extends(api: Api) -> None:
    await _waiting(api)
    # When the id is produced again with replace, then in a batch with extend
    again = {"id": "d", "timestamp_ms": FAR + 10, "payload": "v2", "on_duplicate": "replace"}
    sent = await api.call("POST", "/v1/topics/digest/messages", again)
    assert (sent.status, sent.body) == (200, {"id": "d", "status": "REPLACED"})
    batch = {
        "on_duplicate": "extend",
        "messages": [
            {"id": "d", "timestamp_ms": FAR + 20, "payload": "v3"},
            {"id": "e", "timestamp_ms": FAR},
        ],
    }
    sent = await api.call("POST", "/v1/topics/digest/batches", batch)
    # Then each answer says what became of it, and the message is the replacing one, moved
    assert [r["status"] for r in sent.body["results"]] == ["EXTENDED", "ACCEPTED"]
    got = (await api.call("GET", "/v1/topics/digest/messages/d")).body
    assert (got["payload"], got["timestamp_ms"], got["version"]) == ("v2", FAR + 20, 3)


async def test_a_mode_there_is_not_is_refused_by_name(api: Api) -> None:
    await _waiting(api)
    bad = {"id": "d", "timestamp_ms": FAR + 10, "payload": "v2", "on_duplicate": "merge"}
    sent = await api.call("POST", "/v1/topics/digest/messages", bad)
    assert sent.status == 400
    assert "body.on_duplicate" in sent.body["detail"]
    batch = {"on_duplicate": 1, "messages": [{"id": "d", "timestamp_ms": FAR + 10}]}
    sent = await api.call("POST", "/v1/topics/digest/batches", batch)
    assert sent.status == 400
    got = (await api.call("GET", "/v1/topics/digest/messages/d")).body
    assert (got["payload"], got["version"]) == ("v1", 1)
