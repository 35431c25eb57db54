"""Sentinels that want a password: ``sentinel_username`` and ``sentinel_password``
reach the sentinels only, are masked wherever the URL is shown, and a missing
or wrong password is refused at once, naming the sentinels."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument, StorageUnavailable
from dejaq.core.redact import redact
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis.sentinel import RedisSentinelStorage, parse_sentinel_url
from tests.redis_sentinel import RedisSentinel
from tests.storage_plugins.redis_support import NOW, T, given_topic, msg, opened

SECRET = "s3nt-pass"

# -- URL ------------------------------------------------------------------------


def test_the_sentinels_credentials_are_options_apart_from_the_masters() -> None:
    url = f"redis+sentinel://u:master-pw@a:26379/m/0?sentinel_username=watch&sentinel_password={SECRET}&wait_replicas=1"
    parsed = parse_sentinel_url(url)
    options = parsed.options
    assert (options.username, options.password) == ("u", "master-pw")
    assert (options.sentinel_username, options.sentinel_password) == ("watch", SECRET)
    assert options.wait_replicas == 1
    # The redis:// URL the master's options are read from holds no sentinel option
    assert "sentinel_" not in parsed.redis_url
    storage = storage_from_url(url)
    assert isinstance(storage, RedisSentinelStorage)
    assert SECRET not in storage.options.url


def test_the_sentinel_password_is_masked_where_the_url_is_shown() -> None:
    # Given a storage made from a URL with both passwords
    url = f"redis+sentinel://:master-pw@a:26379/m/0?sentinel_password={SECRET}&socket_timeout_ms=5"
    storage = storage_from_url(url)
    # When its URL is shown (the broker's start-up line, logs, errors go through redact)
    shown = redact(storage.url)
    # Then neither password is in it
    assert SECRET not in shown and "master-pw" not in shown
    assert "sentinel_password=***" in shown
    # And a URL refused for another option's value does not quote it either
    with pytest.raises(InvalidArgument, match="wait_replicas") as refused:
        storage_from_url(f"{url}&wait_replicas=x")
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (f"redis://a:6379/0?sentinel_password={SECRET}", "needs a redis\\+sentinel://"),
        (f"redis+cluster://a:6379/0?sentinel_password={SECRET}", "needs a redis\\+sentinel://"),
        ("redis+sentinel://a:26379/m/0?sentinel_password=", "'sentinel_password' is empty"),
        ("redis+sentinel://a:26379/m/0?sentinel_username=", "'sentinel_username' is empty"),
    ],
    ids=["redis", "cluster", "empty password", "empty user"],
)
def test_a_misplaced_or_empty_sentinel_credential_is_refused_without_its_value(
    bad: str, why: str
) -> None:
    with pytest.raises(InvalidArgument, match=why) as refused:
        storage_from_url(bad)
    assert SECRET not in str(refused.value)


# -- sentinels with a password ----------------------------------------------------


@pytest.mark.parametrize(
    "sentinels",
    ["auth_redis_sentinel", "redis_sentinel"],
    ids=["that want it", "that want none"],
)
async def test_with_a_sentinel_password_messages_go_through(
    request: pytest.FixtureRequest, sentinels: str
) -> None:
    # Given sentinels that want a password (or none: a default user with no
    # password takes any, the storage speaking RESP3's HELLO AUTH), and a master
    # that wants none
    group: RedisSentinel = request.getfixturevalue(sentinels)
    group.flush()
    url = f"{group.url}?sentinel_password={group.sentinel_password or SECRET}"
    # When the storage opens with a sentinel password, and a message is stored
    async with opened(url) as storage:
        await given_topic(storage)
        await storage.insert(T, [msg("a")])
        leases = await storage.lease(LeaseRequest(T, None, NOW, 10, 1_000, "c"))
    # Then it is read back: the sentinels named the master, which was not sent their password
    assert [m.id for m in leases.delivered] == ["a"]


@pytest.mark.parametrize(
    "given",
    ["", "&sentinel_password=wrong", "&sentinel_username=nobody"],
    ids=["none", "wrong password", "unknown user"],
)
async def test_without_the_sentinel_password_the_sentinels_refuse_by_name(
    auth_redis_sentinel: RedisSentinel, given: str
) -> None:
    # Given sentinels that want a password, and a URL without it, or a wrong one
    group = auth_redis_sentinel
    if given.startswith("&sentinel_username"):
        given += f"&sentinel_password={group.sentinel_password}"  # no such ACL user
    storage = storage_from_url(f"{group.url}?socket_timeout_ms=2000{given}")
    # When it opens
    # Then it is unavailable, saying the sentinels refused authentication, naming them
    with pytest.raises(StorageUnavailable, match="refused authentication") as refused:
        await storage.open()
    message = str(refused.value)
    assert all(f"127.0.0.1:{s.port}" in message for s in group.sentinels)
    assert "sentinel_password" in message
    assert group.sentinel_password not in message
