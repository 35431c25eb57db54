"""What every broker of a cluster agrees on: topics, idempotent produce by id,
and ``dejaq cluster status`` (in a cluster and for a single broker)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dejaq.core.errors import NotFound
from dejaq.core.model import InsertStatus, TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing, Producer
from tests.cluster.support import Cluster, now_ms, status, wait_converged
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import Inbox, consuming, wait_until
from tests.e2e.test_cli import DEJAQ, TIMEOUT_S


def cli(*args: str) -> str:
    done = subprocess.run([*DEJAQ, *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_topic_deleted_or_recreated_on_one_broker_changes_on_all(
    cluster: Cluster,
) -> None:
    # Given two brokers and a consumer of a topic on the second
    b0, b1 = (b.address for b in cluster.start(2))
    async with Client(b0) as c0, Client(b1) as c1:
        await Admin(c0).create_topic("t", TopicSettings(buckets=8))
        consumer = await Consumer(c1, "t").start()
        inbox = Inbox(consumer)
        assert (await Admin(c1).describe_topic("t")).topic.settings.buckets == 8

        # When the first broker deletes the topic
        await Admin(c0).delete_topic("t")

        # Then the consumer on the second is told at once
        with pytest.raises(NotFound):
            await inbox.next(timeout_s=5)
        await inbox.close()

        # When it is created again with other settings, the second broker sees them
        await Admin(c0).create_topic("t", TopicSettings(buckets=16))

        async def recreated() -> bool:
            return (await Admin(c1).describe_topic("t")).topic.settings.buckets == 16

        await wait_until(recreated, 10, "the new settings on the other broker")


async def test_a_resent_frame_is_idempotent_on_any_broker(cluster: Cluster) -> None:
    # Given two brokers on shared storage and a frame stored through the first
    b0, b1 = (b.address for b in cluster.start(2))
    frame = [Outgoing(b"x", now_ms() + 60_000, id=f"r{i}") for i in range(5)]
    async with Client(b0) as c0, Client(b1) as c1:
        await Admin(c0).create_topic("t")
        async with Producer(c0, "t") as p:
            assert {r.status for r in await p.send_batch(frame)} == {InsertStatus.ACCEPTED}
        # When a producer that failed over resends it through the second
        async with Producer(c1, "t") as p:
            again = await p.send_batch(frame)
    # Then the ids it chose itself make the resend a no-op
    assert [r.status for r in again] == [InsertStatus.DUPLICATE] * len(frame)


async def test_cluster_status_shows_brokers_consumers_and_buckets(cluster: Cluster) -> None:
    # Given two brokers and a consumer on each
    brokers = [b.address for b in cluster.start(2)]
    async with Client(brokers[0]) as c0, Client(brokers[1]) as c1:
        await Admin(c0).create_topic("jobs", TopicSettings(buckets=10))
        async with consuming(c0, "jobs", consumer_id="a"), consuming(c1, "jobs", consumer_id="b"):
            await wait_converged(brokers, "jobs", consumers=2)

            async def skew_measured() -> bool:  # from a heartbeat, once a second
                return all(b.skew_ms is not None for b in (await status(brokers[1])).brokers)

            await wait_until(skew_measured, 5, "a heartbeat from the other broker")
            # When an operator asks either broker
            report = json.loads(cli("cluster", "status", "--json", "--broker", brokers[1]))
            text = cli("cluster", "status", "--broker", brokers[0])

    # Then both brokers, their clock skew, and who owns which buckets are shown
    assert (report["mode"], report["cluster"], report["healthy"]) == ("etcd", cluster.name, True)
    assert sorted(b["address"] for b in report["brokers"]) == sorted(brokers)
    # One machine, one clock: a heartbeat is received after it was written, so no
    # broker seems ahead (how far behind is the etcd transit time, a benchmark figure)
    assert all(b["skew_ms"] <= 0 for b in report["brokers"])
    (jobs,) = report["topics"]
    owners = sorted((c["broker"], c["id"], c["buckets"]) for c in jobs["consumers"])
    consumer_on = {brokers[0]: "a", brokers[1]: "b"}
    first, second = sorted(brokers)  # consumers sort by (broker, id): contiguous halves
    assert owners == [
        (first, consumer_on[first], [[0, 4]]),
        (second, consumer_on[second], [[5, 9]]),
    ]
    assert f"cluster {cluster.name} (etcd reachable)" in text
    assert "buckets 0-4" in text and "buckets 5-9" in text
    assert second in text


async def test_a_single_broker_shows_itself_owning_every_bucket(tmp_path: Path) -> None:
    broker = BrokerProcess("memory://", tmp_path / "broker.log").start()
    try:
        async with Client(broker.address) as client:
            await Admin(client).create_topic("solo", TopicSettings(buckets=8))
            async with consuming(client, "solo", consumer_id="only"):
                report = json.loads(cli("cluster", "status", "--json", "--broker", broker.address))
    finally:
        assert broker.stop() == 0
    assert (report["mode"], report["healthy"]) == ("single", True)
    assert [b["address"] for b in report["brokers"]] == [broker.address]
    (solo,) = report["topics"]
    assert solo["consumers"] == [{"id": "only", "broker": broker.address, "buckets": [[0, 7]]}]
