"""A cluster runs on one storage: brokers on stores of their own are refused.

``memory://`` lives inside one broker, and two SQLite files on two hosts are two
stores: either way messages produced through one broker would be stranded
while the cluster gives their buckets to consumers elsewhere. The broker
refuses to start, with one readable line and a non-zero exit, and writes
nothing to etcd. Once every broker is gone, the cluster may start on a new store.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aetcd

from tests.cluster.support import Cluster, status
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import wait_until
from tests.etcd_server import EtcdServer


def run_broker(storage: str, etcd: str, cluster: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
    command = [sys.executable, "-m", "dejaq.driver.cli.main", "broker", "--listen", "127.0.0.1:0"]
    options = ["--storage", storage, "--etcd", etcd, "--cluster", cluster]
    return subprocess.run(
        [*command, *options],
        env={**env, "DEJAQ_ETCD_TIMEOUT_S": "5"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def keys_under(etcd: EtcdServer, cluster: str) -> list[str]:
    """Every etcd key of the cluster."""
    host, port = etcd.url.removeprefix("http://").rsplit(":", 1)

    async def read() -> list[str]:
        async with aetcd.Client(host, int(port)) as client:
            found = await client.get_prefix(f"/dejaq/{cluster}/".encode())
            return sorted(kv.key.decode() for kv in found)

    return asyncio.run(read())


def test_memory_storage_with_etcd_is_refused(etcd_server: EtcdServer) -> None:
    # When a broker is started on memory:// in a cluster
    done = run_broker("memory://", etcd_server.url, "memory-refused")
    # Then it exits non-zero with one readable line and never listens
    assert done.returncode == 1
    assert "--etcd needs a storage every broker of the cluster shares, not memory://" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    assert "listening" not in done.stdout
    # And it wrote nothing to etcd
    assert keys_under(etcd_server, "memory-refused") == []


def test_a_broker_on_another_sqlite_file_cannot_join(
    cluster: Cluster, etcd_server: EtcdServer, tmp_path: Path
) -> None:
    # Given a cluster running on one SQLite file
    (first,) = cluster.start(1)
    before = keys_under(etcd_server, cluster.name)
    assert f"/dejaq/{cluster.name}/brokers/{first.address}" in before
    # When a broker on a SQLite file of its own (as on another host) joins it
    done = run_broker(f"sqlite:///{tmp_path / 'elsewhere.db'}", etcd_server.url, cluster.name)
    # Then it refuses to start, saying why, and writes nothing to etcd
    assert done.returncode == 1, done.stderr
    assert f"cluster {cluster.name!r} runs on another storage" in done.stderr
    assert "Traceback" not in done.stderr
    assert "listening" not in done.stdout
    assert keys_under(etcd_server, cluster.name) == before
    # And the cluster still has its one broker
    s = asyncio.run(status(first.address))
    assert [b.address for b in s.brokers] == [first.address]


def test_brokers_on_the_one_storage_join_and_rejoin(cluster: Cluster) -> None:
    # Given a cluster of two brokers on one SQLite file
    first, second = cluster.start(2)
    # When one stops and another starts on the same file
    assert second.stop() == 0
    (third,) = cluster.start(1)
    # Then the new one joins: the cluster is the first and the third
    expected = {first.address, third.address}

    async def joined() -> bool:
        return {b.address for b in (await status(first.address)).brokers} == expected

    asyncio.run(wait_until(joined, 10, "the third broker to join"))


def test_once_every_broker_is_gone_the_cluster_may_start_on_a_new_store(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a cluster whose only broker stopped (as a pod that restarts on a fresh volume)
    (first,) = cluster.start(1)
    assert first.stop() == 0
    # When a broker starts on another SQLite file under the same cluster name
    other = BrokerProcess(
        f"sqlite:///{tmp_path / 'fresh.db'}",
        tmp_path / "fresh.log",
        {"DEJAQ_ETCD": cluster.etcd_url, "DEJAQ_CLUSTER": cluster.name},
    )
    cluster.brokers.append(other)
    other.start()
    # Then it serves as the cluster's broker
    s = asyncio.run(status(other.address))
    assert s.healthy and [b.address for b in s.brokers] == [other.address]
