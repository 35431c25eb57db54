"""Broker addresses as users write them: a missing port is 7700, never gRPC's 443."""

from __future__ import annotations

import re

import pytest

from dejaq.core.errors import InvalidArgument
from dejaq.driver.cli.common import connect
from dejaq.driver.cli.main import build_parser
from dejaq.driver.client import Client, parse_brokers


@pytest.mark.parametrize(
    ("given", "address"),
    [
        ("localhost", "localhost:7700"),
        ("broker-0.dejaq.svc", "broker-0.dejaq.svc:7700"),
        ("10.0.0.7", "10.0.0.7:7700"),
        ("localhost:7701", "localhost:7701"),
        ("[::1]", "[::1]:7700"),
        ("::1", "[::1]:7700"),
        ("[::1]:7701", "[::1]:7701"),
        ("[fe80::1%eth0]", "[fe80::1%eth0]:7700"),
        (" localhost ", "localhost:7700"),
        ("dns:///brokers.example:7700", "dns:///brokers.example:7700"),
        ("unix:/run/dejaq.sock", "unix:/run/dejaq.sock"),
    ],
)
def test_an_address_without_a_port_gets_7700(given: str, address: str) -> None:
    assert parse_brokers(given) == [address]


def test_every_address_of_a_list_and_of_the_environment_gets_its_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parse_brokers("h1,h2:7800, [::1]") == ["h1:7700", "h2:7800", "[::1]:7700"]
    assert parse_brokers(["h1", "h2:7800"]) == ["h1:7700", "h2:7800"]
    monkeypatch.setenv("DEJAQ_BROKER", "localhost")
    assert parse_brokers(None) == ["localhost:7700"]


@pytest.mark.parametrize("given", ["localhost:", "localhost:https", "h:70000", ":7700", "[::1"])
def test_a_malformed_address_is_refused_naming_it(given: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(f"address {given!r}")):
        parse_brokers(given)


async def test_the_client_and_the_cli_dial_port_7700() -> None:
    async with Client("localhost") as client:
        assert client.address == "localhost:7700"
    args = build_parser().parse_args(["topic", "list", "--broker", "[::1]"])
    async with connect(args) as cli_client:
        assert cli_client.addresses == ["[::1]:7700"]
