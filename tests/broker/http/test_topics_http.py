"""Topics, dead letters, cron entries and the cluster over HTTP.

Given a broker with --http, when a topic is created, described, set, listed
and deleted, and cron entries are added, paused, resumed, changed and
deleted, then each answer is the gRPC call's, as JSON.
"""

from __future__ import annotations

from tests.broker.http.conftest import Api

FAR = 2_000_000_000_000


async def test_a_topic_is_created_described_set_listed_and_deleted(api: Api) -> None:
    made = await api.call("POST", "/v1/topics", {"name": "t", "settings": {"buckets": 8}})
    assert made.status == 201 and made.body["settings"]["buckets"] == 8
    again = await api.call("POST", "/v1/topics", {"name": "t"})
    assert (again.status, again.body["code"]) == (409, "ALREADY_EXISTS")

    await api.call("POST", "/v1/topics/t/messages", {"timestamp_ms": FAR})
    await api.call("POST", "/v1/topics/t/messages", {"timestamp_ms": 1})
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
