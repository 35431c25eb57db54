"""Limits per key and the busiest keys over HTTP.

Given a broker with --http, when a topic's limits per key are set and a key's
override is set, shown, listed and removed, then each answer is the gRPC
call's, as JSON, and bad input is a problem that changes nothing.
"""

from __future__ import annotations

from tests.broker.http.conftest import Api


async def test_a_topics_limits_per_key_are_set_and_shown(api: Api) -> None:
    await api.call("POST", "/v1/topics", {"name": "t"})
    set_ = await api.call(
        "PATCH", "/v1/topics/t", {"key_concurrency": 5, "key_rate": 100.0, "key_burst": 10}
    )
    assert set_.status == 200
    s = set_.body["settings"]
    assert (s["key_concurrency"], s["key_rate"], s["key_burst"]) == (5, 100.0, 10)
    bad = await api.call("PATCH", "/v1/topics/t", {"key_rate": -1.0})
    assert (bad.status, bad.body["code"]) == (400, "INVALID_ARGUMENT")
    shown = await api.call("GET", "/v1/topics/t")
    assert shown.body["topic"]["settings"]["key_rate"] == 100.0
    refused = await api.call("POST", "/v1/topics", {"name": "u", "settings": {"key_rate": -1.0}})
    assert (refused.status, refused.body["code"]) == (400, "INVALID_ARGUMENT")
    assert (await api.call("GET", "/v1/topics/u")).status == 404


async def test_a_keys_override_is_set_shown_listed_and_removed(api: Api) -> None:
    await api.call("POST", "/v1/topics", {"name": "t", "settings": {"key_concurrency": 5}})
    made = await api.call("PATCH", "/v1/topics/t/keys/acme/limits", {"concurrency": 50})
    assert made.status == 200
    assert (made.body["overridden"], made.body["concurrency"]) == (True, 50)
    merged = await api.call("PATCH", "/v1/topics/t/keys/acme/limits", {"rate": 20.0})
    assert (merged.body["concurrency"], merged.body["rate"]) == (50, 20.0)

    other = await api.call("GET", "/v1/topics/t/keys/bob/limits")
    assert (other.body["overridden"], other.body["concurrency"]) == (False, 5)
    listed = await api.call("GET", "/v1/topics/t/key-limits")
    assert [o["key"] for o in listed.body["limits"]] == ["acme"]

    assert (await api.call("DELETE", "/v1/topics/t/keys/acme/limits")).status == 200
    gone = await api.call("DELETE", "/v1/topics/t/keys/acme/limits")
    assert (gone.status, gone.body["code"]) == (404, "NOT_FOUND")
    assert (await api.call("GET", "/v1/topics/t/key-limits")).body == {"limits": []}


async def test_a_bad_override_is_a_problem_and_changes_nothing(api: Api) -> None:
    await api.call("POST", "/v1/topics", {"name": "t"})
    empty = await api.call("PATCH", "/v1/topics/t/keys/acme/limits", {})
    assert (empty.status, empty.body["code"]) == (400, "INVALID_ARGUMENT")
    nan = await api.call("PATCH", "/v1/topics/t/keys/acme/limits", {"rate": "NaN"})
    assert nan.status == 400
    assert (await api.call("GET", "/v1/topics/t/key-limits")).body == {"limits": []}


async def test_the_busiest_keys_are_listed(api: Api) -> None:
    await api.call("POST", "/v1/topics", {"name": "t"})
    answer = await api.call("GET", "/v1/topics/t/keys?limit=5")
    assert answer.status == 200 and answer.body["now_ms"] > 0
    assert answer.body.get("keys", []) == []
    too_many = await api.call("GET", "/v1/topics/t/keys?limit=5000")
    assert too_many.status == 400
