"""What only ``redis+sentinel://`` promises beyond the conformance suite: its URL,
giving up (``StorageUnavailable``) when the sentinels name no master, and
``wait_replicas`` on every call (the conformance suite runs on the sentinels'
master through the ``storage`` fixture; failover is in
``test_redis_sentinel_failover.py``)."""

from __future__ import annotations

import signal
import time

import pytest
from redis import exceptions as rex
from redis.asyncio.sentinel import MasterNotFoundError

from dejaq.core.errors import InvalidArgument, StorageUnavailable
from dejaq.core.model import Counts
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis.sentinel import (
    RedisSentinelStorage,
    parse_sentinel_url,
    ran_nothing,
)
from tests.redis_sentinel import SERVICE, RedisSentinel
from tests.storage_plugins.redis_support import HANG_GUARD_S, NOW, T, given_topic, msg, opened

# -- URL ------------------------------------------------------------------------


def test_a_sentinel_url_names_its_sentinels_service_and_database() -> None:
    url = "redis+sentinel://u:p%40ss@a:26379,[::1]:26380/my%20master/2?wait_replicas=1"
    parsed = parse_sentinel_url(url)
    assert parsed.sentinels == (("a", 26379), ("::1", 26380))
    assert (parsed.service, parsed.db) == ("my master", 2)
    assert (parsed.options.username, parsed.options.password) == ("u", "p@ss")
    assert parsed.options.wait_replicas == 1
    assert parsed.options.topic_slots == 1
    assert parse_sentinel_url("redis+sentinel://a:26379/m").db == 0
    storage = storage_from_url(url)
    assert isinstance(storage, RedisSentinelStorage)
    assert storage.url == url
    assert "p@ss" not in storage.options.url


def test_a_tls_sentinel_url_takes_the_rediss_options() -> None:
    options = parse_sentinel_url("rediss+sentinel://a:26379/m/0?ssl_check_hostname=false").options
    assert options.tls_arguments()["ssl_check_hostname"] is False
    assert parse_sentinel_url("redis+sentinel://a:26379/m/0").options.tls_arguments() == {}


@pytest.mark.parametrize(
    "bad",
    [
        "redis+sentinel://a:26379",  # no service
        "redis+sentinel://a:26379/m/x",  # bad database
        "redis+sentinel://a/m/0",  # no port
        "redis+sentinel://a:26379,b/m/0",
        "redis+sentinel://a:0/m/0",
        "redis+sentinel://a:26379/m/0?wait=1",  # unknown option
        "redis+sentinel://a:26379/m/0?wait_replicas=x",
        "redis+sentinel://a:26379/m/0?ssl_check_hostname=false",  # TLS option without TLS
    ],
)
def test_a_bad_sentinel_url_is_refused_by_name(bad: str) -> None:
    with pytest.raises(InvalidArgument):
        storage_from_url(bad)


# -- what is sent again -----------------------------------------------------------


@pytest.mark.parametrize(
    ("cause", "sent_again"),
    [
        (MasterNotFoundError("No master found for 'm'"), True),  # the sentinels have it down
        (rex.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Refused."), True),
        (rex.ConnectionError("The previous master is now a slave"), True),  # READONLY
        (rex.ConnectionError("Connection closed by server."), False),  # after sending
        (rex.TimeoutError("Timeout reading from socket"), False),
        (None, False),  # fewer replicas acknowledged than asked: the call ran
    ],
)
def test_only_a_call_that_ran_nothing_is_sent_again(
    cause: BaseException | None, sent_again: bool
) -> None:
    assert ran_nothing(cause) is sent_again


# -- no master ------------------------------------------------------------------


async def test_a_service_the_sentinels_do_not_know_is_unavailable_after_the_timeout(
    redis_sentinel: RedisSentinel,
) -> None:
    # Given a URL naming a service no sentinel monitors
    url = redis_sentinel.url.replace(f"/{SERVICE}/", "/no-such-master/") + "?socket_timeout_ms=300"
    storage = storage_from_url(url)
    # When it opens
    started = time.monotonic()
    with pytest.raises(StorageUnavailable, match="no master took the call"):
        await storage.open()
    # Then it asked again until its timeout, and no longer than a guard
    assert 0.3 <= time.monotonic() - started < HANG_GUARD_S


# -- WAIT -------------------------------------------------------------------------


async def test_with_wait_replicas_a_lease_goes_on_and_a_produce_is_refused_without_replicas(
    redis_sentinel: RedisSentinel,
) -> None:
    # Given a topic with a due message, and every replica of the master stopped
    redis_sentinel.flush()
    url = f"{redis_sentinel.url}?wait_replicas=1&wait_timeout_ms=300"
    async with opened(url) as storage:
        await given_topic(storage)
        await storage.insert(T, [msg("a")])
        replicas = [r.process for r in redis_sentinel.replicas()]
        for process in replicas:
            assert process is not None
            process.send_signal(signal.SIGSTOP)
        try:
            # When a consumer leases it: a lease move, whose loss only means a redelivery
            # Then it is leased without waiting for a replica
            request = LeaseRequest(T, None, NOW, 10, 1_000, "c")
            assert [m.id for m in (await storage.lease(request)).delivered] == ["a"]
            # And a produce, which waits for a replica that cannot answer, is
            # refused as unavailable (the broker retries it)
            with pytest.raises(StorageUnavailable, match="replicas acknowledged"):
                await storage.insert(T, [msg("b")])
        finally:
            for process in replicas:
                assert process is not None
                process.send_signal(signal.SIGCONT)
    redis_sentinel.wait_healthy()


# -- TLS ------------------------------------------------------------------------


async def test_messages_go_through_a_tls_sentinel_group(
    tls_redis_sentinel: RedisSentinel,
) -> None:
    # Given sentinels and servers that take only TLS with a client certificate
    tls_redis_sentinel.flush()
    assert tls_redis_sentinel.url.startswith("rediss+sentinel://")
    async with opened(f"{tls_redis_sentinel.url}&wait_replicas=1") as storage:
        # When messages are produced, leased and acked through them
        await given_topic(storage)
        await storage.insert(T, [msg(f"m{i}") for i in range(20)])
        leases = await storage.lease(LeaseRequest(T, None, NOW, 100, 1_000, "c"))
        outcomes = await storage.ack(T, [(m.id, m.version) for m in leases.delivered], "c", NOW)
        # Then all of them went through, and the replica acknowledged every call
        assert len(leases.delivered) == len(outcomes) == 20
        assert await storage.counts(T, NOW) == Counts()
    # And without a client certificate the sentinels are not even asked
    bare = tls_redis_sentinel.url.split("&ssl_certfile")[0] + "&socket_timeout_ms=300"
    with pytest.raises(StorageUnavailable):
        async with opened(bare):
            pass
