"""IPv6 forms of internal IPv4 addresses: refused as the address they carry, at
set time (the URL's literal) and at dial time (the resolved addresses)."""

from __future__ import annotations

import ipaddress

import pytest

from dejaq.broker.webhook_addresses import embedded_ipv4
from dejaq.broker.webhook_targets import Allowlist, check, literal_refused
from dejaq.broker.webhooks.resolver import AllowedResolver, Refused
from dejaq.core.errors import InvalidArgument

NONE = Allowlist()

INTERNAL = [
    # NAT64, the well-known prefix (RFC 6052): the last 32 bits
    "64:ff9b::7f00:1",  # 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # 169.254.169.254, the metadata service
    "64:ff9b::a00:1",  # 10.0.0.1
    "64:ff9b::192.168.0.1",
    "64:ff9b::c000:8",  # 192.0.0.8 (RFC 6890's 192.0.0.0/24)
    # NAT64, the local-use prefix (RFC 8215): local whatever it carries
    "64:ff9b:1::a00:1",
    "64:ff9b:1:0:808:808::",
    # 6to4 (RFC 3056): bits 16-47
    "2002:7f00:1::",  # 127.0.0.1
    "2002:a9fe:a9fe::1",  # 169.254.169.254
    "2002:c0a8:1::",  # 192.168.0.1
    # IPv4-compatible (::/96)
    "::7f00:1",
    "::a9fe:a9fe",
    "::a00:1",
    # IPv4-mapped and IPv4-translated
    "::ffff:7f00:1",
    "::ffff:0:7f00:1",  # ::ffff:0:0:0/96
    "::ffff:0:a9fe:a9fe",
    # site-local (RFC 3879)
    "fec0::1",
    "feff::1",
]

PUBLIC = [
    "64:ff9b::808:808",  # 8.8.8.8 behind NAT64
    "64:ff9b::8.8.4.4",
    "2002:808:808::",  # 8.8.8.8 over 6to4
    "2002:5db8:d822::1",  # 93.184.216.34
    "::ffff:808:808",
    "::ffff:0:808:808",
    "::808:808",
    "2606:2800:220:1::1",
    "93.184.216.34",
]


@pytest.mark.parametrize("address", INTERNAL)
def test_ipv6_forms_of_internal_addresses_are_refused(address: str) -> None:
    # Given a broker with no allowlist
    # Then the address is refused when dialled and as a URL's literal
    assert not NONE.admits(address)
    assert literal_refused(f"[{address}]", NONE)


@pytest.mark.parametrize("address", PUBLIC)
def test_ipv6_forms_of_public_addresses_stay_admitted(address: str) -> None:
    assert NONE.admits(address)
    assert not literal_refused(f"[{address}]", NONE)


@pytest.mark.parametrize(
    ("address", "carried"),
    [
        ("64:ff9b::7f00:1", "127.0.0.1"),
        ("2002:7f00:1::", "127.0.0.1"),
        ("::7f00:1", "127.0.0.1"),
        ("::ffff:0:7f00:1", "127.0.0.1"),
        ("::ffff:7f00:1", "127.0.0.1"),
        ("2606:2800:220:1::1", None),
        ("127.0.0.1", None),
    ],
)
def test_the_carried_ipv4_address_is_read_from_each_form(address: str, carried: str) -> None:
    found = embedded_ipv4(ipaddress.ip_address(address))
    assert (str(found) if found else None) == carried


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::7f00:1]/h",
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
        "http://[64:ff9b:1::a00:1]/h",
        "http://[2002:7f00:1::]:8080/h",
        "http://[::7f00:1]/h",
        "http://[::ffff:0:7f00:1]/h",
        "http://[fec0::1]/h",
    ],
)
async def test_a_target_url_naming_an_internal_ipv6_form_is_refused_when_set(url: str) -> None:
    with pytest.raises(InvalidArgument, match="--webhook-allow"):
        await check(url, NONE)


async def test_a_target_url_naming_a_public_ipv6_form_is_accepted() -> None:
    await check("http://[64:ff9b::808:808]/h", NONE)
    await check("http://[2002:808:808::]/h", NONE)


@pytest.mark.parametrize("address", ["64:ff9b::7f00:1", "2002:7f00:1::", "::7f00:1", "fec0::1"])
async def test_the_resolver_refuses_to_dial_an_internal_ipv6_form(address: str) -> None:
    with pytest.raises(Refused, match="--webhook-allow"):
        await AllowedResolver(NONE).resolve(address, 80)


async def test_the_allowlist_can_still_name_such_ranges() -> None:
    # Given an operator who allows the NAT64 prefix, site-local, and loopback
    allow = Allowlist.parse("64:ff9b::/96,fec0::/10,127.0.0.0/8")
    # Then the NAT64 and site-local ranges are admitted by their own CIDRs
    assert allow.admits("64:ff9b::a9fe:a9fe") and allow.admits("fec0::1")
    await check("http://[64:ff9b::a00:1]/h", allow)
    assert await AllowedResolver(allow).resolve("64:ff9b::a00:1", 80) == ["64:ff9b::a00:1"]
    # And a CIDR holding an IPv4 address admits the IPv6 forms carrying it
    assert allow.admits("2002:7f00:1::") and allow.admits("::ffff:0:7f00:1")
    # But nothing more: another internal range stays refused
    assert not allow.admits("2002:a00:1::") and not allow.admits("64:ff9b:1::1")
