"""A cluster with TLS and --auth: brokers never call each other (they meet in
etcd and storage), so clients with credentials are all it takes. A consumer's
lease owner (principal#consumer) is the same on every broker, so a consumer
that fails over still settles its leases."""

from __future__ import annotations

from pathlib import Path

from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.cluster import cluster_status
from dejaq.driver.tls import ClientTls
from tests.certs import Certs
from tests.cluster.support import Cluster
from tests.e2e.support import consuming, create_topic, now_ms, produce_one, wait_until
from tests.security.support import TOKENS, standard_policy, tls_env, write_policy


def _client(addresses: list[str], certs: Certs, principal: str) -> Client:
    return Client(addresses, timeout_s=5, tls=ClientTls(str(certs.ca)), token=TOKENS[principal])


async def test_a_tls_cluster_with_auth_delivers_across_brokers_and_failover(
    cluster: Cluster, certs: Certs, tmp_path: Path
) -> None:
    # Given two brokers serving TLS with an auth file, alice consuming on b as "w"
    auth = write_policy(tmp_path / "auth.yaml", standard_policy())
    a, b = cluster.start(2, **tls_env(certs), DEJAQ_AUTH=str(auth))
    async with _client([a.address], certs, "admin") as admin:
        topic = await create_topic(admin, "shared-cluster", lease_ms=60_000)
    async with (
        _client([b.address, a.address], certs, "alice") as on_b,
        consuming(on_b, topic, consumer_id="w") as inbox,
    ):
        async with _client([a.address], certs, "alice") as on_a:

            async def registered() -> bool:
                s = await cluster_status(on_a)
                t = next((t for t in s.topics if t.name == topic), None)
                return t is not None and [(c.id, c.broker) for c in t.consumers] == [
                    ("alice#w", b.address)
                ]

            await wait_until(registered, what="alice#w registered on b, seen from a")

            # When alice produces on a, due shortly
            first = await produce_one(on_a, topic, now_ms() + 200)

            # Then the consumer on b gets it; and after b dies, its lease is still
            # alice#w's to ack through a
            d = await inbox.next(15)
            assert d.id == first
            b.kill()
            await wait_until(lambda: on_b.address == a.address, what="the consumer on a")
            await d.ack(confirm=True)
            info = await Admin(on_a).describe_topic(topic)
            assert (info.counts.leased, info.counts.due, info.counts.waiting) == (0, 0, 0)
