"""Failed console sign-ins per client address, with a clock of its own.

Given an address that sends unknown tokens, when its tries are spent, then it
waits (and is told how long) while other addresses do not; the tries come
back with time; IPv6 hosts count by /64; the table of addresses is bounded.
"""

from __future__ import annotations

from dejaq.broker.http.sign_in_limit import SignInLimit, client_key, retry_after_header


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_waits_once_its_tries_are_spent() -> None:
    clock = Clock()
    limit = SignInLimit(burst=3, refill_s=6.0, clock=clock)
    assert limit.retry_after("10.0.0.1") == 0
    # The third failure spends the tries, and is the one worth a log line
    assert [limit.failed("10.0.0.1") for _ in range(3)] == [False, False, True]
    assert limit.retry_after("10.0.0.1") == 6.0
    assert limit.retry_after("10.0.0.2") == 0
    # One try back after REFILL_S
    clock.now += 3
    assert limit.retry_after("10.0.0.1") == 3.0
    clock.now += 3
    assert limit.retry_after("10.0.0.1") == 0
    # Spent again: logged again, once
    assert limit.failed("10.0.0.1") is True
    assert limit.failed("10.0.0.1") is False


def test_ipv6_hosts_count_by_64_and_mapped_ipv4_as_ipv4() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9")
    assert client_key("2001:db8:1:2::1") != client_key("2001:db8:1:3::1")
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_key("not-an-ip") == "not-an-ip"


def test_the_table_of_addresses_is_bounded() -> None:
    limit = SignInLimit(burst=1, max_addresses=2)
    for host in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        limit.failed(host)
    assert limit.retry_after("10.0.0.1") == 0  # the least recently failed went first
    assert limit.retry_after("10.0.0.3") > 0


def test_retry_after_is_whole_seconds_and_never_zero() -> None:
    assert [retry_after_header(s) for s in (0.01, 1.0, 5.2)] == ["1", "1", "6"]
