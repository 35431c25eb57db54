"""``PUT /v1/topics/{name}``: a set-up that runs again.

Given a broker with --http, when a topic is put, then it is made; put again
with the same settings, it is the same topic (nothing changes); put with
other settings, it is refused with a 409 problem that lists each differing
setting with both values, and nothing changes.
"""

from __future__ import annotations

import pytest

from dejaq.core.errors import AlreadyExists
from dejaq.core.model import TopicSettings
from dejaq.driver import Admin, Client
from tests.broker.http.conftest import Api


async def test_a_topic_put_twice_with_the_same_settings_is_one_topic(api: Api) -> None:
    # Given a topic put with settings
    body = {"settings": {"buckets": 8, "lease_ms": 45_000}}
    made = await api.call("PUT", "/v1/topics/setup", body)
    assert made.status == 200, made.body
    assert (made.body["name"], made.body["settings"]["buckets"]) == ("setup", 8)
    # When it is put again with the same settings (the defaults spelt out or not)
    again = await api.call("PUT", "/v1/topics/setup", body)
    spelt = {"settings": {**body["settings"], "max_payload_bytes": 1 << 20, "kind": "timeline"}}
    spelt_out = await api.call("PUT", "/v1/topics/setup", spelt)
    # Then each answer is the topic as it was made
    assert again.status == spelt_out.status == 200
    assert again.body == spelt_out.body == made.body
    # and a POST of it is still refused
    posted = await api.call("POST", "/v1/topics", {"name": "setup", **body})
    assert (posted.status, posted.body["code"]) == (409, "ALREADY_EXISTS")


async def test_a_topic_put_with_other_settings_is_refused_naming_each_difference(
    api: Api,
) -> None:
    # Given a topic with 8 buckets and a 45 s lease
    body = {"settings": {"buckets": 8, "lease_ms": 45_000}}
    made = await api.call("PUT", "/v1/topics/setup", body)
    assert made.status == 200
    # When it is put with 16 buckets, the default lease and a rate cap
    other = {"settings": {"buckets": 16, "max_rate": 50.0}}
    refused = await api.call("PUT", "/v1/topics/setup", other)
    # Then it is a 409 problem listing each differing setting with both values
    assert (refused.status, refused.content_type) == (409, "application/problem+json")
    assert (refused.body["code"], refused.body["kind"]) == ("ALREADY_EXISTS", "AlreadyExists")
    assert refused.body["differences"] == [
        {"setting": "buckets", "existing": 8, "requested": 16},
        {"setting": "lease_ms", "existing": 45_000, "requested": 30_000},
        {"setting": "max_rate", "existing": 0.0, "requested": 50.0},
    ]
    assert refused.body["detail"] == (
        "topic 'setup' exists with other settings: buckets 8 (asked 16),"
        " lease_ms 45000 (asked 30000), max_rate 0.0 (asked 50.0)"
    )
    # and nothing changed
    shown = await api.call("GET", "/v1/topics/setup")
    assert shown.body["topic"] == made.body


async def test_bad_settings_are_refused_before_the_topic_is_looked_at(api: Api) -> None:
    # Given a topic
    assert (await api.call("PUT", "/v1/topics/setup", {})).status == 200
    # When it is put with settings out of range, or a field the route sets
    bad = await api.call("PUT", "/v1/topics/setup", {"settings": {"buckets": 100_000}})
    named = await api.call("PUT", "/v1/topics/setup", {"name": "other"})
    # Then each is a 400 saying why
    assert (bad.status, bad.body["code"]) == (400, "INVALID_ARGUMENT")
    assert "buckets" in bad.body["detail"]
    assert (named.status, named.body["detail"]) == (400, "body: unknown field 'name'")


async def test_the_driver_s_exist_ok_is_the_same_rule_over_grpc(api: Api) -> None:
    # Given a topic put over HTTP
    await api.call("PUT", "/v1/topics/setup", {"settings": {"lease_ms": 45_000}})
    async with Client(api.grpc_address) as client:
        admin = Admin(client)
        # When the driver creates it with the same settings and exist_ok, then it is that topic
        same = await admin.create_topic("setup", TopicSettings(lease_ms=45_000), exist_ok=True)
        assert same.settings.lease_ms == 45_000
        # and with other settings it is AlreadyExists naming the difference
        with pytest.raises(AlreadyExists) as refused:
            await admin.create_topic("setup", TopicSettings(lease_ms=60_000), exist_ok=True)
    assert str(refused.value) == (
        "topic 'setup' exists with other settings: lease_ms 45000 (asked 60000)"
    )
