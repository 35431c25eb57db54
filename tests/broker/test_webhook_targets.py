"""The webhook allowlist: refused ranges, allowed hosts and CIDRs, the resolver."""

from __future__ import annotations

import asyncio

import pytest

from dejaq.broker.webhook_targets import Allowlist, check, literal_refused, target_host
from dejaq.broker.webhooks.resolver import AllowedResolver, Refused
from dejaq.core.errors import InvalidArgument

NONE = Allowlist()


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "224.0.0.1",
    ],
)
def test_internal_addresses_are_refused_without_an_allowlist(address: str) -> None:
    assert not NONE.admits(address)


def test_public_addresses_are_admitted() -> None:
    assert NONE.admits("93.184.216.34") and NONE.admits("2606:2800:220:1::1")


def test_an_allowlist_admits_its_cidrs_and_hosts() -> None:
    allow = Allowlist.parse("10.0.0.0/8, 127.0.0.1 ,hooks.internal")
    assert allow.admits("10.9.9.9") and allow.admits("127.0.0.1")
    assert not allow.admits("127.0.0.2") and not allow.admits("192.168.0.1")
    assert allow.admits_host("HOOKS.internal.")


def test_a_bad_allowlist_entry_is_named() -> None:
    with pytest.raises(InvalidArgument, match="'bad/entry'"):
        Allowlist.parse("10.0.0.0/8,bad/entry")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://x.example/",
        "x.example/h",
        "http://",
        "http://u:p@x.example/",
        "http://x:99999/",
        "http://[::1/",
        "http://x .example/",
        "http://x.example/\n",
    ],
)
def test_what_is_not_an_http_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidArgument, match="webhook URL"):
        target_host(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/h",
        "https://localhost/h",
        "http://10.0.0.1/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data",
    ],
)
async def test_internal_targets_are_refused_when_set(url: str) -> None:
    with pytest.raises(InvalidArgument, match="--webhook-allow"):
        await check(url, NONE)


async def test_an_allowed_internal_target_is_accepted() -> None:
    await check("http://127.0.0.1:9/h", Allowlist.parse("127.0.0.1"))
    await check("http://localhost:9/h", Allowlist.parse("localhost"))


def test_a_literal_address_is_judged_without_resolving() -> None:
    assert literal_refused("127.0.0.1", NONE) and literal_refused("[::1]", NONE)
    assert not literal_refused("127.0.0.1", Allowlist.parse("127.0.0.0/8"))
    assert not literal_refused("hooks.example.com", NONE)  # a name: the resolver judges it


async def test_the_resolver_dials_only_admitted_addresses() -> None:
    # Given a name that resolves to loopback (as a rebinding name would, later)
    with pytest.raises(Refused, match="--webhook-allow"):
        await AllowedResolver(NONE).resolve("localhost", 80)
    found = await AllowedResolver(Allowlist.parse("127.0.0.0/8")).resolve("localhost", 80)
    assert found and all(a.startswith("127.") for a in found)


async def test_dials_at_the_same_moment_share_one_lookup_and_each_is_judged() -> None:
    # Given a resolver that admits loopback, and one that admits nothing
    allowed = AllowedResolver(Allowlist.parse("127.0.0.0/8"))
    # When ten dials resolve the same name at once
    found = await asyncio.gather(*(allowed.resolve("localhost", 80) for _ in range(10)))
    # Then each gets the same addresses, and no lookup is left behind
    assert all(f == found[0] for f in found) and found[0]
    assert not allowed._lookups
    # And a literal address is judged as a name's addresses are, without a lookup
    assert await allowed.resolve("127.0.0.1", 80) == ["127.0.0.1"]
    refusing = AllowedResolver(NONE)
    results = await asyncio.gather(
        *(refusing.resolve("localhost", 80) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, Refused) for r in results)
    with pytest.raises(Refused):
        await refusing.resolve("::1", 80)
