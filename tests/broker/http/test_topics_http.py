"""Topics, dead letters, cron entries and the cluster over HTTP.

Given a broker with --http, when a topic is created, described, set, listed
and deleted, and cron entries are added, paused, resumed, changed and
deleted, then each answer is the gRPC call's, as JSON.
"""

from __future__ import annotations

from dejaq.driver import Admin, Client
from tests.broker.http.conftest import Api
from tests.e2e.support import consuming

FAR = 2_000_000_000_000
PAST = 1_000_000_000_000  # 2001: due at once


async def test_a_topic_is_created_described_set_listed_and_deleted(api: Api) -> None:
    made = await api.call("POST", "/v1/topics", {"name": "t", "settings": {"buckets": 8}})
    assert made.status == 201 and made.body["settings"]["buckets"] == 8
    again = await api.call("POST", "/v1/topics", {"name": "t"})
    assert (again.status, again.body["code"]) == (409, "ALREADY_EXISTS")

    await api.call("POST", "/v1/topics/t/messages", {"timestamp_ms": FAR})
    await api.call("POST", "/v1/topics/t/messages", {"timestamp_ms": PAST})
    described = await api.call("GET", "/v1/topics/t")
    assert described.body["counts"] == {"waiting": 1, "due": 1, "leased": 0, "dead": 0}

    capped = await api.call("PATCH", "/v1/topics/t", {"max_rate": 50.0})
    assert capped.body["settings"]["max_rate"] == 50.0
    fixed = await api.call("PATCH", "/v1/topics/t", {"kind": "priority"})
    assert (fixed.status, fixed.body["code"]) == (409, "FAILED_PRECONDITION")

    listed = await api.call("GET", "/v1/topics")
    assert [t["name"] for t in listed.body["topics"]] == ["t"]
    assert (await api.call("DELETE", "/v1/topics/t")).status == 200
    assert (await api.call("GET", "/v1/topics/t")).status == 404


async def test_the_dead_timeline_is_listed_and_redriven(api: Api) -> None:
    await api.call("POST", "/v1/topics", {"name": "d"})
    empty = await api.call("GET", "/v1/topics/d/dead?limit=10")
    assert empty.body == {"messages": []}
    redriven = await api.call("POST", "/v1/topics/d/dead/redrive", {"ids": ["x"]})
    assert redriven.body == {"redriven": 0}


async def test_cron_entries_are_added_paused_resumed_changed_and_deleted(api: Api) -> None:
    await api.call("POST", "/v1/topics", {"name": "c"})
    entry = {"id": "daily", "schedule": "0 9 * * *", "payload": "report"}
    added = await api.call("POST", "/v1/topics/c/cron", entry)
    assert added.status == 201 and added.body["version"] == 1 and added.body["next_ms"] > 0

    paused = await api.call("POST", "/v1/topics/c/cron/daily/pause", {})
    assert (paused.body["paused"], paused.body["next_ms"]) == (True, 0)
    not_here = await api.call("POST", "/v1/topics/c/cron/daily/pause", {"schedule": "* * * * *"})
    assert (not_here.status, not_here.body["code"]) == (400, "INVALID_ARGUMENT")
    resumed = await api.call("POST", "/v1/topics/c/cron/daily/resume", {})
    assert resumed.body["paused"] is False

    changed = await api.call("PATCH", "/v1/topics/c/cron/daily", {"schedule": "0 10 * * *"})
    assert changed.body["schedule"] == "0 10 * * *"
    shown = await api.call("GET", "/v1/topics/c/cron/daily?upcoming=3")
    assert len(shown.body["upcoming_ms"]) == 3
    listed = await api.call("GET", "/v1/topics/c/cron")
    assert [e["id"] for e in listed.body["entries"]] == ["daily"]

    stale = await api.call("DELETE", "/v1/topics/c/cron/daily?version=1")
    assert (stale.status, stale.body["code"]) == (409, "ABORTED")
    assert (await api.call("DELETE", "/v1/topics/c/cron/daily")).status == 200
    assert (await api.call("GET", "/v1/topics/c/cron/daily")).status == 404


async def test_the_cluster_status_names_this_broker(api: Api) -> None:
    status = await api.call("GET", "/v1/cluster")
    assert status.body["mode"] == "single"
    assert [b["address"] for b in status.body["brokers"]] == [api.grpc_address]


async def test_a_topic_s_cron_timeline_is_in_no_listing(api: Api) -> None:
    # Given a topic with a cron entry (kept on its hidden TOPIC~cron timeline)
    await api.call("POST", "/v1/topics", {"name": "r"})
    entry = {"id": "daily", "schedule": "0 9 * * *", "payload": "report"}
    assert (await api.call("POST", "/v1/topics/r/cron", entry)).status == 201
    # When the topics and the cluster are listed, then only the topic is named
    listed = await api.call("GET", "/v1/topics")
    assert [t["name"] for t in listed.body["topics"]] == ["r"]
    status = await api.call("GET", "/v1/cluster")
    assert [t["name"] for t in status.body["topics"]] == ["r"]


async def test_http_calls_are_counted_apart_from_grpc_ones(api: Api) -> None:
    registry = api.broker.context.metrics.registry

    def calls(name: str, method: str, code: str) -> float:
        value = registry.get_sample_value(f"{name}_total", {"method": method, "code": code})
        return value or 0.0

    await api.call("POST", "/v1/topics", {"name": "m"})
    await api.call("GET", "/v1/topics/none")
    assert calls("dejaq_http_requests", "CreateTopic", "OK") == 1
    assert calls("dejaq_http_requests", "DescribeTopic", "NOT_FOUND") == 1
    assert calls("dejaq_grpc_requests", "CreateTopic", "OK") == 0


async def test_a_topic_forecast_counts_its_waiting_messages_in_bins_ahead(api: Api) -> None:
    await api.call("POST", "/v1/topics", {"name": "f"})
    empty = await api.call("GET", "/v1/topics/f/forecast?horizon_ms=3600000&step_ms=60000")
    assert empty.status == 200 and empty.body.get("counts", [0] * 60) == [0] * 60
    due = int(empty.body["start_ms"]) + 10 * 60_000 + 5_000
    await api.call("POST", "/v1/topics/f/messages", {"timestamp_ms": due})
    await api.call("POST", "/v1/topics/f/messages", {"timestamp_ms": FAR})

    ahead = await api.call("GET", "/v1/topics/f/forecast?horizon_ms=3600000&step_ms=60000")
    counts = [int(c) for c in ahead.body["counts"]]
    assert (len(counts), sum(counts), counts[10]) == (60, 1, 1)

    too_fine = await api.call("GET", "/v1/topics/f/forecast?horizon_ms=3600000&step_ms=1")
    assert (too_fine.status, too_fine.body["code"]) == (400, "INVALID_ARGUMENT")
    missing = await api.call("GET", "/v1/topics/nope/forecast")
    assert (missing.status, missing.body["code"]) == (404, "NOT_FOUND")


async def test_an_admin_sets_the_lease_and_max_deliveries(api: Api) -> None:
    await api.call("POST", "/v1/topics", {"name": "s", "settings": {"lease_ms": 30_000}})
    changed = await api.call("PATCH", "/v1/topics/s", {"lease_ms": 5_000, "max_deliveries": 3})
    assert changed.status == 200
    settings = changed.body["settings"]
    assert (settings["lease_ms"], settings["max_deliveries"]) == (5_000, 3)
    async with Client(api.grpc_address) as client:
        stored = (await Admin(client).describe_topic("s")).topic.settings
    assert (stored.lease_ms, stored.max_deliveries) == (5_000, 3)
    # A lease out of range is refused and changes nothing, the rest of the call included
    bad = await api.call("PATCH", "/v1/topics/s", {"lease_ms": 0, "max_deliveries": 1})
    assert (bad.status, bad.body["code"]) == (400, "INVALID_ARGUMENT")
    assert "lease" in bad.body["detail"]
    kept = (await api.call("GET", "/v1/topics/s")).body["topic"]["settings"]
    assert (kept["lease_ms"], kept["max_deliveries"]) == (5_000, 3)
    unlimited = await api.call("PATCH", "/v1/topics/s", {"max_deliveries": 0})
    assert unlimited.body["settings"].get("max_deliveries", 0) == 0


async def test_the_timeline_pages_by_due_time(api: Api) -> None:
    await api.call("POST", "/v1/topics", {"name": "b", "settings": {"buckets": 4}})
    for n, at in enumerate((FAR + 30, FAR + 10, FAR + 20, FAR + 10)):
        await api.call("POST", "/v1/topics/b/messages", {"id": f"m{n}", "timestamp_ms": at})
    first = await api.call("GET", "/v1/topics/b/timeline?limit=3&without_payloads=true")
    assert [m["id"] for m in first.body["messages"]] == ["m1", "m3", "m2"]
    assert first.body["done"] is False
    cursor = first.body["next_after_timestamp_ms"], first.body["next_after_id"]
    assert cursor == (FAR + 20, "m2")
    rest = await api.call(
        "GET", f"/v1/topics/b/timeline?after_timestamp_ms={cursor[0]}&after_id={cursor[1]}"
    )
    assert [m["id"] for m in rest.body["messages"]] == ["m0"] and rest.body["done"] is True
    missing = await api.call("GET", "/v1/topics/nowhere/timeline")
    assert missing.status == 404


async def test_describe_and_list_tell_the_recent_deliveries(api: Api) -> None:
    # Given a topic whose due message a consumer received and acked
    await api.call("POST", "/v1/topics", {"name": "a"})
    await api.call("POST", "/v1/topics/a/messages", {"id": "now", "timestamp_ms": PAST})
    async with Client(api.grpc_address) as client, consuming(client, "a") as inbox:
        delivery = await inbox.next()
        await delivery.ack()
    # Then the topic's description and the list say it delivered, and how late
    activity = (await api.call("GET", "/v1/topics/a")).body["activity"]
    assert activity["topic"] == "a" and activity["delivery_rate"] > 0
    assert activity["lateness_p99_ms"] > 0 and activity["over_ms"] > 0
    listed = (await api.call("GET", "/v1/topics")).body
    assert [a["topic"] for a in listed["activity"]] == ["a"]
    assert listed["activity"][0]["delivery_rate"] > 0


async def test_an_admin_pauses_and_resumes_a_topic(api: Api) -> None:
    # Given a topic paused over HTTP
    await api.call("POST", "/v1/topics", {"name": "p"})
    paused = await api.call("POST", "/v1/topics/p/pause", {})
    assert paused.status == 200 and paused.body["settings"]["paused"] is True
    assert int(paused.body["settings"]["paused_at_ms"]) > 0
    described = await api.call("GET", "/v1/topics/p")
    assert described.body["topic"]["settings"]["paused"] is True
    # The pause route takes no settings: a body field is refused
    extra = await api.call("POST", "/v1/topics/p/pause", {"max_rate": 5.0})
    assert (extra.status, extra.body["code"]) == (400, "INVALID_ARGUMENT")
    async with Client(api.grpc_address) as client, consuming(client, "p") as inbox:
        # When a message falls due while it is paused, nothing is delivered
        await api.call("POST", "/v1/topics/p/messages", {"id": "late", "timestamp_ms": PAST})
        await inbox.quiet_for(0.5)
        # And once resumed, it goes out
        resumed = await api.call("POST", "/v1/topics/p/resume", {})
        assert resumed.status == 200 and resumed.body["settings"]["paused"] is False
        delivery = await inbox.next()
        assert delivery.id == "late"
        await delivery.ack()
    # A PATCH says the same with a field
    patched = await api.call("PATCH", "/v1/topics/p", {"paused": True})
    assert patched.body["settings"]["paused"] is True
    missing = await api.call("POST", "/v1/topics/nope/pause", {})
    assert (missing.status, missing.body["code"]) == (404, "NOT_FOUND")
