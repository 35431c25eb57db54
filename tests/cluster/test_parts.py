"""The etcd coordinator's pure parts: key layout, endpoints, hints, registrar, skew."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from dejaq.broker.cluster.hints import HintPublisher
from dejaq.broker.cluster.keys import Key, Keys, Kind
from dejaq.broker.cluster.registrar import Registrar
from dejaq.broker.cluster.skew import SkewTracker
from dejaq.broker.config import BrokerConfig
from dejaq.broker.etcd_endpoints import Endpoint, parse_endpoints
from dejaq.core.errors import InvalidArgument


def test_keys_round_trip() -> None:
    keys = Keys("prod")
    assert keys.broker("10.0.0.1:7700") == b"/dejaq/prod/brokers/10.0.0.1:7700"
    cases = [
        (keys.broker("h:1"), Key(Kind.BROKER, broker="h:1")),
        (keys.consumer("jobs", "h:1", "c-1"), Key(Kind.CONSUMER, "h:1", "jobs", "c-1")),
        (keys.topic("jobs"), Key(Kind.TOPIC, topic="jobs")),
        (keys.hint("jobs", "h:1"), Key(Kind.HINT, "h:1", "jobs")),
    ]
    for raw, parsed in cases:
        assert keys.parse(raw) == parsed
    assert keys.parse(b"/dejaq/other/brokers/h:1") is None  # another cluster
    assert keys.parse(b"/dejaq/prod/brokers/h:1/extra") is None
    assert keys.hint("jobs", "h:1").startswith(keys.hints_of("jobs"))


def test_endpoints() -> None:
    assert parse_endpoints("http://127.0.0.1:2379, h2:2380,h3") == [
        Endpoint("127.0.0.1", 2379),
        Endpoint("h2", 2380),
        Endpoint("h3", 2379),
    ]
    assert parse_endpoints("https://e1:2379,https://e2") == [
        Endpoint("e1", 2379, tls=True),
        Endpoint("e2", 2379, tls=True),
    ]
    bad_ones = ("", "ftp://h:2379", "http://h:port", "http://h:1/path", "http://a,https://b")
    for bad in (*bad_ones, "http://[::1"):
        with pytest.raises(InvalidArgument):
            parse_endpoints(bad)


def test_credentials_in_an_etcd_url_are_refused_without_showing_the_password() -> None:
    with pytest.raises(InvalidArgument) as refused:
        parse_endpoints("https://dejaq:hunter2@e:2379")

    assert "--etcd-user" in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_cluster_settings_are_read_and_checked() -> None:
    env = {"DEJAQ_ETCD": "http://e:2379", "DEJAQ_CLUSTER": "blue", "DEJAQ_ETCD_TTL_S": "3"}
    config = BrokerConfig.from_sources({"advertise": "10.0.0.1:7700"}, env)
    assert (config.etcd, config.cluster, config.etcd_ttl_s) == ("http://e:2379", "blue", 3)
    assert config.advertise == "10.0.0.1:7700"
    for bad in ({"DEJAQ_CLUSTER": "a/b"}, {"DEJAQ_ETCD_TTL_S": "1"}, {"DEJAQ_ETCD": "ftp://x"}):
        with pytest.raises(InvalidArgument):
            BrokerConfig.from_sources({}, bad)


NOW = 1_000_000


def test_hints_only_when_they_can_matter() -> None:
    hints = HintPublisher(horizon_ms=1000)
    assert not hints.offer("t", NOW + 5000, NOW)  # beyond the horizon: the re-scan finds it
    assert hints.offer("t", NOW + 500, NOW)
    assert hints.offer("t", NOW + 200, NOW)  # earlier: replaces the pending one
    assert hints._pending == {"t": NOW + 200}


async def test_hints_coalesce_and_skip_what_a_pending_one_covers() -> None:
    hints = HintPublisher(horizon_ms=1000)
    written: list[tuple[str, int]] = []
    two_written = asyncio.Event()

    async def publish(topic: str, ts: int) -> None:
        written.append((topic, ts))
        if len(written) == 2:
            two_written.set()

    task = asyncio.create_task(hints.run(publish))
    hints.offer("t", NOW + 300, NOW)
    hints.offer("t", NOW + 100, NOW)
    hints.offer("u", NOW, NOW)
    await asyncio.wait_for(two_written.wait(), timeout=5)
    assert sorted(written) == [("t", NOW + 100), ("u", NOW)]  # one write per topic
    # A later message while the published hint is still ahead: the receiver looks
    # at storage at NOW + 100 anyway, so no write.
    assert not hints.offer("t", NOW + 400, NOW + 50)
    # Once that time has passed, or for an earlier one, hints flow again.
    assert hints.offer("t", NOW + 400, NOW + 150)
    assert hints.offer("u", NOW - 5, NOW + 150)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_the_registrar_writes_only_the_difference() -> None:
    # Given a registrar that wants two consumers, and one of them already registered
    registrar = Registrar()
    registrar.want({("t", "a"), ("t", "b")})
    registered = {("t", "a"), ("t", "gone")}
    writes: list[tuple[str, str, str]] = []

    async def put(topic: str, consumer: str) -> None:
        writes.append(("put", topic, consumer))

    async def delete(topic: str, consumer: str) -> None:
        writes.append(("delete", topic, consumer))

    # When a round runs
    await registrar.sync(registered, put, delete)
    # Then it puts what is missing, deletes what is no longer wanted, and nothing else
    assert writes == [("put", "t", "b"), ("delete", "t", "gone")]
    assert registered == {("t", "a"), ("t", "b")}


def test_skew_is_the_least_delayed_sample_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    skew = SkewTracker(warn_ms=50)
    with caplog.at_level(logging.WARNING):
        # Their clock is 80 ms ahead; transit delays of 1-6 ms lower the samples.
        for delay in (5, 1, 6, 3):
            skew.observe("b", NOW + 80, NOW + delay)
    assert skew.skew_ms("b") == 79
    assert [r for r in caplog.records if "clock skew" in r.message and "b is +" in r.message]
    assert len(caplog.records) == 1
    skew.forget("b")
    assert skew.skew_ms("b") is None


def test_a_step_of_our_own_clock_moves_the_skew_at_once() -> None:
    # Given a peer heard ten times, on time, by a host whose clocks the test moves
    wall_us, mono_us = NOW * 1_000, 7_000_000
    skew = SkewTracker(warn_ms=50, clocks=lambda: (wall_us, mono_us))
    for _ in range(10):
        wall_us += 1_000_000
        mono_us += 1_000_000
        skew.observe("b", wall_us // 1_000, wall_us // 1_000)
    assert skew.skew_ms("b") == 0
    # When our wall clock steps 400 ms ahead, the monotonic clock running on
    wall_us += 400_000
    # Then the peer is 400 ms behind us at once, with no new heartbeat
    assert skew.skew_ms("b") == -400
    assert skew.all() == {"b": -400}


def test_a_peer_stepped_ahead_and_back_is_not_still_seen_ahead() -> None:
    # Given a peer whose clock ran 500 ms ahead for a few heartbeats
    skew = SkewTracker(warn_ms=50)
    for delay in (3, 1, 2):
        skew.observe("b", NOW + 500, NOW + delay)
    assert skew.skew_ms("b") == 499
    # When its clock steps back to ours
    skew.observe("b", NOW, NOW + 2)
    # Then it is seen on time at once, not at +499 ms until the window ages
    assert skew.skew_ms("b") == -2
    # and the least delayed sample wins again from there
    skew.observe("b", NOW, NOW + 1)
    assert skew.skew_ms("b") == -1
