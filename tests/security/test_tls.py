"""TLS between clients and a broker process: the driver and the CLI over TLS,
and the clear refusals when a side does not hold up its end."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from dejaq.core.errors import BrokerUnavailable, InvalidArgument
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.sync import SyncClient
from dejaq.driver.tls import ClientTls
from tests.certs import Certs
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import consuming, create_topic, now_ms, produce_one
from tests.security.support import TOKENS, cli, client


def _topic(prefix: str = "tls") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_the_driver_produces_and_consumes_over_tls(
    tls_broker: BrokerProcess, certs: Certs
) -> None:
    async with client(tls_broker.address, certs) as c:
        topic = await create_topic(c, _topic())
        mid = await produce_one(c, topic, now_ms(), b"sealed")
        async with consuming(c, topic) as inbox:
            d = await inbox.next()
            assert (d.id, d.payload) == (mid, b"sealed")
            await d.ack(confirm=True)
        assert (await Admin(c).describe_topic(topic)).counts.leased == 0


def test_the_sync_driver_takes_tls_settings(tls_broker: BrokerProcess, certs: Certs) -> None:
    with SyncClient(tls_broker.address, tls=ClientTls(str(certs.ca))) as c:
        topic = _topic()
        c.admin.create_topic(topic)
        c.producer(topic).send(b"sync", delay_ms=0)
        consumer = c.consumer(topic)
        d = consumer.receive(timeout=10)
        assert d.payload == b"sync"
        d.ack(confirm=True)
        consumer.close()


def test_the_cli_speaks_tls_by_flags_and_by_environment(
    tls_broker: BrokerProcess, certs: Certs
) -> None:
    topic = _topic()
    flags = ["--broker", tls_broker.address, "--tls-ca", str(certs.ca)]
    env = {"DEJAQ_BROKER": tls_broker.address, "DEJAQ_TLS_CA": str(certs.ca)}
    assert cli("topic", "create", topic, *flags).returncode == 0
    done = cli("produce", topic, "--in", "0s", "over tls", env=env)
    assert done.returncode == 0, done.stderr
    got = cli("consume", topic, "--count", "1", *flags)
    assert got.returncode == 0, got.stderr
    assert '"payload": "over tls"' in got.stdout


def test_a_plaintext_client_of_a_tls_broker_is_told_what_is_missing(
    tls_broker: BrokerProcess,
) -> None:
    for command in (("topic", "list"), ("produce", "t", "--in", "1s", "x")):
        done = cli(*command, "--broker", tls_broker.address)
        assert done.returncode == 1
        assert "if the broker serves TLS, give its CA" in done.stderr, command


async def test_a_broker_certificate_from_another_ca_is_refused(
    tls_broker: BrokerProcess, certs: Certs
) -> None:
    distrustful = Client(tls_broker.address, timeout_s=10, tls=ClientTls(str(certs.other_ca)))
    async with distrustful:
        with pytest.raises(BrokerUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
            await Admin(distrustful).list_topics()


async def test_mutual_tls_refuses_a_client_without_a_certificate(
    mtls_broker: BrokerProcess, certs: Certs
) -> None:
    async with client(mtls_broker.address, certs, token=TOKENS["admin"]) as c:
        with pytest.raises(BrokerUnavailable, match="requires client certificates"):
            await Admin(c).list_topics()


async def test_mutual_tls_knows_a_principal_by_its_certificate(
    mtls_broker: BrokerProcess, certs: Certs
) -> None:
    async with client(mtls_broker.address, certs, cn="ops") as ops:
        topic = await create_topic(ops, _topic("t"))
        assert topic in {t.name for t in await Admin(ops).list_topics()}


async def test_under_mutual_tls_a_token_names_the_principal(
    mtls_broker: BrokerProcess, certs: Certs
) -> None:
    # CN=stranger is no principal, but the token is alice's: alice it is.
    async with client(mtls_broker.address, certs, token=TOKENS["alice"], cn="stranger") as c:
        await Admin(c).list_topics()
    async with client(mtls_broker.address, certs, cn="stranger") as c:
        with pytest.raises(Exception, match="CN='stranger' is not a known principal"):
            await Admin(c).list_topics()


async def test_many_tls_clients_at_once(tls_broker: BrokerProcess, certs: Certs) -> None:
    async def one() -> int:
        async with client(tls_broker.address, certs) as c:
            return len(await Admin(c).list_topics())

    assert len(await asyncio.gather(*(one() for _ in range(8)))) == 8


def test_client_tls_mistakes_are_named(certs: Certs, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(InvalidArgument, match=f"cannot read TLS CA {missing}"):
        Client("127.0.0.1:7700", tls=ClientTls(missing))
    with pytest.raises(InvalidArgument, match="needs its key"):
        Client("127.0.0.1:7700", tls=ClientTls(str(certs.ca), cert=str(certs.server.cert)))
    (tmp_path / "junk.pem").write_text("junk")
    with pytest.raises(InvalidArgument, match="is not a PEM file"):
        SyncClient("127.0.0.1:7700", tls=ClientTls(str(tmp_path / "junk.pem")))
    done = cli("topic", "list", "--tls-ca", missing)
    assert done.returncode == 1
    assert f"dejaq: error: cannot read TLS CA {missing}: No such file" in done.stderr
