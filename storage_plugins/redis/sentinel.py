"""``redis+sentinel://`` — the ``redis://`` backend on a master that Redis Sentinel watches.

Everything stored and every call are those of ``redis://`` (``storage``): one
master holds the data, its replicas copy it. What differs is how the master is
found (``SentinelRunner``): redis-py's asyncio Sentinel client asks the
sentinels for the master's address whenever it opens a connection, and drops
a connection whose server has become a replica.

Failover. When the master dies the sentinels agree it is down (after their
``down-after-milliseconds``), promote a replica, and point the others at it.
Meanwhile a call finds the old master refusing connections, or no master at
all (the sentinels report it down), or, if it comes back, a replica answering
READONLY. None of those ran anything that counts (a write a demoted master
took is wiped when it resynchronises from the new one), so the call is sent
again, a pause apart (``retry``), until ``socket_timeout_ms`` has passed since
its first try, then fails with ``StorageUnavailable`` and the broker retries
it whole. A connection lost after sending is different — the call may have
run on the master before it died — so the call fails with
``StorageUnavailable`` at once and the caller retries it (a produce is
idempotent by id; a lease taken and lost comes back when it expires). The
new master has no scripts loaded: the first NOSCRIPT loads them (``scripts.Runner``).

Replication. With ``wait_replicas=N`` every write but a lease move (a lease
pass, an extend, a nack, a hand back, a release: ``RedisStorage``) ends with
``WAIT N wait_timeout_ms`` on its connection, and fails with
``StorageUnavailable`` when fewer replicas acknowledged: what it returned is
then on N replicas besides the master. Sentinel promotes the replica with the
largest replication offset it knows of, so with N equal to the number of
replicas no produce, ack, move or cancel that returned is lost when the master
dies. A lease move may be: its message is delivered again (while its first
consumer may still hold it; that consumer's ack is then refused), and a
master without replicas goes on delivering. With fewer (``wait_replicas=1`` and two
replicas), the promoted replica is one that took the write unless Sentinel's
view of the offsets, refreshed every second during a failover, is older than
the last writes. Without WAIT (the default) replication is asynchronous: a
failover loses whatever the dead master acknowledged and had not sent to the
promoted replica yet, typically its last few milliseconds — produces (never
delivered), acks (delivered again), leases (the message due again while its
first consumer still holds it), nacks, extends, moves and cancels.

Authentication. The URL's credentials are the master's; the sentinels get
their own, ``sentinel_username`` and ``sentinel_password`` (``requirepass`` or
an ACL user on the sentinels), and nothing when those are not given. When no
sentinel answers and one of them refused the credentials, the call fails at
once with ``StorageRefused`` (a ``StorageUnavailable``) naming the sentinels
(``SentinelsRefused``):
a wrong password does not come right by asking again.

Time. The storage clock (``server_time_us``) is the master's; after a
failover, the promoted replica's (loopback or NTP-synchronised hosts keep
them within milliseconds; a lease's expiry is compared against that clock).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from redis import exceptions as rex
from redis.asyncio import Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel
from redis.backoff import NoBackoff

from dejaq.core.errors import InvalidArgument, StorageUnavailable
from dejaq.core.redact import redact
from dejaq.storage_plugins.redis.options import SENTINEL_OPTIONS, RedisOptions, parse_url
from dejaq.storage_plugins.redis.retry import Deadline, refused_connection
from dejaq.storage_plugins.redis.scripts import Call, Runner
from dejaq.storage_plugins.redis.storage import RedisStorage

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
# redis-py's word, on a connection it dropped because its server answered READONLY.
_DEMOTED = "is now a slave"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SentinelUrl:
    """A parsed ``redis+sentinel://`` URL."""

    sentinels: tuple[tuple[str, int], ...]
    service: str  # the master's name in the sentinels' configuration
    db: int
    options: RedisOptions  # dejaq's options, the credentials of the master and the sentinels'
    redis_url: str  # the same options on a redis:// URL, as ``RedisStorage`` reads them
    # (without the sentinels' credentials, which are not redis:// options)


def parse_sentinel_url(url: str) -> SentinelUrl:
    """``redis+sentinel://[[user]:password@]host:port[,host:port...]/SERVICE[/db][?option=value]``;
    the options are those of ``redis://`` (``rediss+sentinel://``: with the ``ssl_*`` ones),
    and ``sentinel_username`` / ``sentinel_password``. ``InvalidArgument`` names the fault."""
    parts = urlsplit(url)
    expected = f"expected {parts.scheme}://host:port[,host:port...]/SERVICE/0, got {redact(url)!r}"
    if parts.scheme not in SENTINEL_SCHEMES:
        raise InvalidArgument(expected)
    credentials, _, hosts = parts.netloc.rpartition("@")
    sentinels = []
    for address in hosts.split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidArgument(f"bad sentinel address {address!r}: {expected}")
        sentinels.append((host.strip("[]"), int(port)))
    service, _, db = parts.path.strip("/").partition("/")
    if not service:
        raise InvalidArgument(f"no service (master) name: {expected}")
    if not (db == "" or db.isdigit()):
        raise InvalidArgument(f"bad database {db!r}: {expected}")
    # The options are checked as a redis:// URL's: one reader for both.
    tls = parts.scheme.startswith("rediss")
    scheme = "rediss" if tls else "redis"
    options = parse_url(urlunsplit((scheme, "localhost", "/0", parts.query, "")), sentinel=True)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = urlencode([(k, v) for k, v in pairs if k not in SENTINEL_OPTIONS])
    stand_in = urlunsplit((scheme, "localhost", "/0", query, ""))
    username, _, password = credentials.partition(":")
    bare = urlunsplit((parts.scheme, hosts, parts.path, "", ""))
    options = dataclasses.replace(
        options, url=bare, username=unquote(username), password=unquote(password)
    )
    return SentinelUrl(tuple(sentinels), unquote(service), int(db or 0), options, stand_in)


def ran_nothing(exc: BaseException | None) -> bool:
    """Nothing of the batch ran on a master: no connection could be made, the
    sentinels know no master now, or the server was a replica."""
    if isinstance(exc, MasterNotFoundError) or refused_connection(exc):
        return True
    return isinstance(exc, rex.ConnectionError) and _DEMOTED in str(exc)


class SentinelsRefused(rex.AuthenticationError):
    """No sentinel answered, and one refused the credentials it was given (or
    wanted some): asking again cannot help, so nothing sends the call again."""


class _Sentinels(Sentinel):
    """redis-py's ``Sentinel``, asking for the master one call at a time: its
    ``discover_master`` swaps the sentinel that answered to the front of its
    list after an await, and two calls at once (several tasks reconnecting
    during a failover) can leave a sentinel twice in the list and drop another,
    its connections with it (seen with redis-py 8.1). Its loop is redis-py's,
    keeping the errors themselves, to tell a refused password from a sentinel down."""

    def __init__(self, sentinels: list[tuple[str, int]], **kwargs: Any) -> None:
        super().__init__(sentinels, **kwargs)  # type: ignore[no-untyped-call]  # redis-py untyped
        self._asking = asyncio.Lock()
        self._names = ", ".join(f"{host}:{port}" for host, port in sentinels)

    def _refusal(self, error: rex.AuthenticationError) -> str:
        if self.sentinel_kwargs.get("password") is None:
            return (
                "refused authentication: they want a password, and the URL gives no"
                " sentinel_password (nor sentinel_username, for an ACL user)"
            )
        return (
            f"refused authentication ({error}): check the URL's sentinel_password"
            " (and sentinel_username, for an ACL user)"
        )

    async def discover_master(self, service_name: str) -> Any:
        async with self._asking:
            errors: list[rex.RedisError] = []
            for i, sentinel in enumerate(self.sentinels):
                try:
                    masters: dict[str, Any] = await sentinel.sentinel_masters()  # type: ignore[assignment]
                except (rex.ConnectionError, rex.TimeoutError) as exc:
                    errors.append(exc)
                    continue
                state = masters.get(service_name)
                if state and self.check_master_state(state, service_name):  # type: ignore[no-untyped-call]
                    # The sentinel that answered is asked first next time, as redis-py does.
                    self.sentinels[0], self.sentinels[i] = sentinel, self.sentinels[0]
                    forced = self._force_master_ip
                    return (state["ip"] if forced is None else forced), state["port"]
            refused = [e for e in errors if isinstance(e, rex.AuthenticationError)]
            if refused and len(errors) == len(self.sentinels):
                raise SentinelsRefused(f"the sentinels {self._names} {self._refusal(refused[0])}")
            detail = f" : {', '.join(repr(e) for e in errors)}" if errors else ""
            raise MasterNotFoundError(f"No master found for {service_name!r}{detail}")


class SentinelRunner(Runner):
    """Sends calls to the master the sentinels name, again while none takes them."""

    def __init__(self, client: Redis, wait: tuple[int, int] | None, deadline_s: float) -> None:
        super().__init__(client, wait)
        self._deadline_s = deadline_s

    async def load(self) -> None:
        await self._until_taken(super().load)

    async def _send(
        self, calls: Sequence[Call], atomic: bool, wait: tuple[int, int] | None
    ) -> tuple[list[Any], int]:
        return await self._until_taken(partial(super()._send, calls, atomic, wait))

    async def _until_taken(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()`` again, a pause apart, while it fails having run nothing,
        until the deadline; a failure that may have run something is raised at once."""
        deadline = Deadline(self._deadline_s)
        while True:
            try:
                return await attempt()
            except StorageUnavailable as exc:
                if not ran_nothing(exc.__cause__):
                    raise
                if deadline.passed():
                    raise StorageUnavailable(
                        f"redis sentinel: no master took the call within {deadline.seconds:g} s"
                        f" (failover under way?): {exc}"
                    ) from exc
            await deadline.pause()


class RedisSentinelStorage(RedisStorage):
    """Storage on a Redis master watched by Sentinel: ``redis+sentinel://``.

    ``redis+sentinel://[[user]:password@]host:port[,host:port...]/SERVICE/0[?option=value&...]``
    names the sentinels (one or more: each is asked in turn) and the service,
    the master's name in their configuration (``sentinel monitor SERVICE ...``);
    the credentials are the master's, and the sentinels are asked with
    ``sentinel_username`` and ``sentinel_password`` (without, when not given).
    ``rediss+sentinel://`` speaks TLS to the sentinels and to the master,
    with the ``ssl_*`` options of ``rediss://``. The other options are those of
    ``redis://`` (``RedisStorage``); ``wait_replicas`` makes every write but
    a lease move wait for that many replicas, as on ``redis+cluster://``. Failover and what can
    be lost: this module's docstring.
    """

    def __init__(self, url: str) -> None:
        self.sentinel_url = parse_sentinel_url(url)
        # RedisStorage reads the same options from a redis:// URL; the master's
        # credentials and the sentinels' addresses are this class's.
        super().__init__(self.sentinel_url.redis_url)
        self.url = url
        self.options = self.sentinel_url.options
        self._sentinel: _Sentinels | None = None

    def _connect(self, timeout_s: float) -> tuple[Redis | RedisCluster, Runner]:
        o, target = self.options, self.sentinel_url
        tls = o.tls_arguments()
        sockets = {
            "socket_timeout": o.socket_timeout_ms / 1000,
            "socket_connect_timeout": o.connect_timeout_ms / 1000,
        }
        sentinel_tls = {"ssl": True, **tls} if tls else {}
        login = {"username": o.sentinel_username or None, "password": o.sentinel_password or None}
        self._sentinel = _Sentinels(
            list(target.sentinels),
            sentinel_kwargs={**sockets, "retry": Retry(NoBackoff(), 0), **sentinel_tls, **login},
        )
        client = self._sentinel.master_for(
            target.service, db=target.db, **o.client_arguments(timeout_s, credentials=True)
        )
        return client, SentinelRunner(client, self._wait, o.socket_timeout_ms / 1000)

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            if self._sentinel is not None:
                sentinel, self._sentinel = self._sentinel, None
                await sentinel.aclose()
