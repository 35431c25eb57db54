"""What a ``redis://`` or ``rediss://`` URL says: the server to connect to and dejaq's options.

``redis://[[user]:password@]host[:port][/db]?option=value&...``; each option is
described on ``RedisStorage``. ``rediss://`` is the same over TLS, with the
``ssl_*`` options below. ``redis+cluster://[[user]:password@]host:port[,host:port...]/0``
(and ``rediss+cluster://``) names a Redis Cluster by one or more seed nodes,
with the same options; a cluster has only database 0, and a topic created
through it spreads over ``CLUSTER_TOPIC_SLOTS`` hash slots unless
``topic_slots`` says otherwise. ``sentinel_username`` and ``sentinel_password``
are the sentinels' own credentials, on ``redis+sentinel://`` URLs only
(``storage_plugins/redis/sentinel.py``). An unknown option or a bad value is refused
with ``InvalidArgument`` naming it, when the backend is built; the URL is
quoted with its password masked.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact


@dataclass(frozen=True, slots=True)
class RedisOptions:
    """A parsed ``redis://`` or ``rediss://`` URL."""

    url: str  # the server URL without dejaq's options
    # redis+cluster:// only: the seed nodes (host, port) and the credentials
    seeds: tuple[tuple[str, int], ...] = ()
    username: str = ""
    password: str = ""
    wait_replicas: int = 0
    wait_timeout_ms: int = 1000
    socket_timeout_ms: int = 5000
    connect_timeout_ms: int = 2000
    topic_slots: int = 1
    max_tombstones: int = 1_000_000  # a topic's, the oldest forgotten first; 0: no bound
    # rediss:// only: the CA to trust (default: the system's), a client
    # certificate and key (PEM files), and whether the server's name is checked.
    ssl_ca_certs: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    ssl_check_hostname: bool = True
    # redis+sentinel:// only: the sentinels' credentials (the URL's are the master's)
    sentinel_username: str = ""
    sentinel_password: str = ""

    @property
    def cluster(self) -> bool:
        return bool(self.seeds)

    def client_arguments(self, timeout_s: float, credentials: bool = False) -> dict[str, Any]:
        """Keyword arguments of a redis-py client: its timeouts, no retry of its
        own (the storage's callers decide), TLS; with ``credentials`` also the
        user, the password and ``ssl`` (for a client not made from the URL)."""
        tls = self.tls_arguments()
        out: dict[str, Any] = {
            "socket_timeout": timeout_s,
            "socket_connect_timeout": self.connect_timeout_ms / 1000,
            "retry": Retry(NoBackoff(), 0),
            **tls,
        }
        if credentials:
            out |= {"username": self.username or None, "password": self.password or None}
            out["ssl"] = bool(tls)
        return out

    def tls_arguments(self) -> dict[str, Any]:
        """Keyword arguments of redis-py's TLS connection (empty for redis://)."""
        if not self.url.startswith("rediss"):
            return {}
        given = {
            "ssl_ca_certs": self.ssl_ca_certs,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
        }
        return {
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": self.ssl_check_hostname,
            **{k: v for k, v in given.items() if v},
        }


# A topic's hash slots on a cluster unless ``topic_slots`` says otherwise. Each
# slot is one more script in every pass, settle and produce that spans the
# topic; measured on 3 masters at 2k msgs/s, the masters spent 136 us of CPU a
# message with 4 slots, 156 with 8 and 187 with 16. The slots' tags split them
# evenly over m masters when m divides their count (``keys.tags``): 6 does for
# the smallest cluster ``redis-cli --cluster create`` makes (3 masters) and
# for 2 or 6, at less cost than 8 or 12 (docs/storage.md).
CLUSTER_TOPIC_SLOTS = 6
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")

FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")
_NOT_OPTIONS = ("url", "seeds", "username", "password")
OPTIONS = tuple(f.name for f in dataclasses.fields(RedisOptions) if f.name not in _NOT_OPTIONS)
_MAY_BE_ZERO = ("wait_replicas", "max_tombstones")
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


def parse_url(url: str, sentinel: bool = False) -> RedisOptions:
    """Read a ``redis(s)://host:port/db?option=value`` URL; ``InvalidArgument`` names the fault.
    ``sentinel``: the options of a ``redis+sentinel://`` URL, its sentinels' credentials too."""
    parts = urlsplit(url)
    if parts.scheme in CLUSTER_SCHEMES:
        return _cluster_url(url)
    db = parts.path.lstrip("/")
    if (
        parts.scheme not in ("redis", "rediss")
        or not parts.hostname
        or not (db == "" or db.isdigit())
    ):
        raise InvalidArgument(f"expected redis://host:port/db or rediss://..., got {redact(url)!r}")
    try:
        parts.port  # noqa: B018 - checked now, not when the client connects
    except ValueError as exc:
        raise InvalidArgument(f"bad port in redis URL {redact(url)!r}: {exc}") from None
    values = _options(parts.scheme, parts.query, sentinel)
    return RedisOptions(urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), **values)


def _cluster_url(url: str) -> RedisOptions:
    """``redis+cluster://[[user]:password@]host:port[,host:port...]/0?option=value``."""
    parts = urlsplit(url)
    expected = f"expected {parts.scheme}://host:port[,host:port...]/0, got {redact(url)!r}"
    if parts.path.lstrip("/") not in ("", "0"):
        raise InvalidArgument(f"a Redis Cluster has only database 0: {expected}")
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    seeds = []
    for seed in hosts.split(","):
        host, _, port = seed.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidArgument(f"bad seed node {seed!r}: {expected}")
        seeds.append((host.strip("[]"), int(port)))
    values = _options(parts.scheme, parts.query)
    values.setdefault("topic_slots", CLUSTER_TOPIC_SLOTS)
    bare = urlunsplit((parts.scheme, hosts, parts.path, "", ""))
    return RedisOptions(bare, tuple(seeds), unquote(username), unquote(password), **values)


def _options(scheme: str, query: str, sentinel: bool = False) -> dict[str, Any]:
    """dejaq's options of a URL, checked."""
    values: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in OPTIONS:
            raise InvalidArgument(f"unknown redis option {key!r}: expected one of {OPTIONS}")
        if key in SENTINEL_OPTIONS and not sentinel:
            raise InvalidArgument(f"redis option {key!r} needs a redis+sentinel:// URL")
        values[key] = _value(key, value)
    tls = [key for key in values if key.startswith("ssl_")]
    if tls and not scheme.startswith("rediss"):
        raise InvalidArgument(f"redis option {tls[0]!r} needs a rediss:// (TLS) URL")
    if bool(values.get("ssl_certfile")) != bool(values.get("ssl_keyfile")):
        raise InvalidArgument("redis options ssl_certfile and ssl_keyfile go together")
    return values


def _value(key: str, value: str) -> Any:
    if key in SENTINEL_OPTIONS:
        if not value:  # the value itself is never quoted: it may be a password
            raise InvalidArgument(f"redis option {key!r} is empty")
        return value
    if key in FILES:
        if not os.access(value, os.R_OK):
            raise InvalidArgument(f"redis option {key}: cannot read the file {value!r}")
        return value
    if key == "ssl_check_hostname":
        if value.lower() not in _BOOLEANS:
            raise InvalidArgument(f"bad value {value!r} for redis option {key!r}: true or false")
        return _BOOLEANS[value.lower()]
    if not value.isdigit() or (key not in _MAY_BE_ZERO and int(value) == 0):
        raise InvalidArgument(f"bad value {value!r} for redis option {key!r}")
    return int(value)
