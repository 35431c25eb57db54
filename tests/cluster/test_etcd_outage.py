"""etcd going away: brokers keep serving on the last assignment, say so, and
re-join when it is back. A broker that cannot reach etcd at start-up refuses
to start, readably."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.cluster.support import (
    Cluster,
    Recorder,
    holder_overlaps,
    now_ms,
    status,
    wait_converged,
)
from tests.e2e.support import produce, wait_until
from tests.etcd_server import EtcdServer
from tests.servers import free_port, require_binary, running, temporary_root


@pytest.fixture
def own_etcd() -> Iterator[EtcdServer]:
    """An etcd of this test's own: it is killed and restarted."""
    with running(EtcdServer(require_binary("etcd"), temporary_root("etcd"))) as server:
        yield server


async def test_brokers_ride_out_an_etcd_restart(own_etcd: EtcdServer, tmp_path: Path) -> None:
    # Given two brokers in a cluster, a consumer on each
    cluster = Cluster("outage", own_etcd.url, tmp_path)
    recorder = Recorder()
    try:
        brokers = cluster.start(2)
        a = [b.address for b in brokers]
        topic = "steady"
        async with Client(a[0]) as client:
            await Admin(client).create_topic(topic, TopicSettings(buckets=16))
            for i in range(2):
                await recorder.add(f"c{i}", [a[i]], topic)
            await wait_converged(a, topic, consumers=2)
            sent: list[str] = []

            async def send(phase: str) -> None:
                # One frame on each broker, due at once and a little later.
                for i, address in enumerate(a):
                    msgs = [
                        Outgoing(b"x", now_ms() + 50 * j, id=f"{phase}-{i}-{j}") for j in range(10)
                    ]
                    async with Client(address) as c:
                        await produce(c, topic, msgs)
                    sent.extend(m.id for m in msgs)

            await send("before")

            # When etcd dies
            own_etcd.kill()

            async def all_report(healthy: bool) -> bool:
                return [(await status(x)).healthy for x in a] == [healthy] * len(a)

            await wait_until(lambda: all_report(False), 10, "brokers to notice etcd is gone")

            # Then delivery goes on with the last assignment
            await send("during")
            await recorder.wait_for(sent, timeout_s=10)
            assert all(b.alive for b in brokers)
            still = await status(a[0])
            assert len(still.brokers) == 2 and not still.healthy  # the last view, flagged

            # When etcd comes back, the brokers re-join and agree again
            own_etcd.start()
            await wait_until(lambda: all_report(True), 15, "brokers to re-join etcd")
            await wait_converged(a, topic, consumers=2)
            await send("after")
            await recorder.wait_for(sent, timeout_s=10)
    finally:
        await recorder.close()
        codes = cluster.stop_all()
    # ... and nothing crashed, nothing came twice or was held twice
    assert set(recorder.ids()) == set(sent)
    assert len(recorder.seen) == len(sent)
    assert not holder_overlaps(recorder.seen)
    assert all(code == 0 for code in codes.values()), codes


def test_a_broker_that_cannot_reach_etcd_does_not_start(tmp_path: Path) -> None:
    # Given no etcd listening where the broker is told to look
    nowhere = f"http://127.0.0.1:{free_port()}"
    # When a broker starts
    command = [sys.executable, "-m", "dejaq.driver.cli.main", "broker"]
    storage = f"sqlite:///{tmp_path / 'd.db'}"
    options = ["--listen", "127.0.0.1:0", "--storage", storage, "--etcd", nowhere]
    done = subprocess.run(
        [*command, *options],
        env={**_clean_env(), "DEJAQ_ETCD_TIMEOUT_S": "1"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    # Then it exits non-zero with one readable line, no traceback
    assert done.returncode == 1
    assert f"cannot reach etcd at {nowhere}" in done.stderr
    assert "Traceback" not in done.stderr
    assert "listening" not in done.stdout


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
