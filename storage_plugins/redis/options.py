"""What a ``redis://`` URL says: the server to connect to and dejaq's options.

``redis://[[user]:password@]host[:port][/db]?option=value&...``; each option is
described on ``RedisStorage``. An unknown option or a bad value is refused with
``InvalidArgument`` naming it, when the backend is built.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from dejaq.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class RedisOptions:
    """A parsed ``redis://`` URL."""

    url: str  # the server URL without dejaq's options
    wait_replicas: int = 0
    wait_timeout_ms: int = 1000
    socket_timeout_ms: int = 5000
    connect_timeout_ms: int = 2000
    topic_slots: int = 1


OPTIONS = tuple(f.name for f in dataclasses.fields(RedisOptions) if f.name != "url")
_MAY_BE_ZERO = ("wait_replicas",)


def parse_url(url: str) -> RedisOptions:
    """Read a ``redis://host:port/db?option=value`` URL; ``InvalidArgument`` names what is wrong."""
    parts = urlsplit(url)
    db = parts.path.lstrip("/")
    if parts.scheme != "redis" or not parts.hostname or not (db == "" or db.isdigit()):
        raise InvalidArgument(f"expected redis://host:port/db, got {url!r}")
    values: dict[str, int] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in OPTIONS:
            raise InvalidArgument(f"unknown redis option {key!r}: expected one of {OPTIONS}")
        if not value.isdigit() or (key not in _MAY_BE_ZERO and int(value) == 0):
            raise InvalidArgument(f"bad value {value!r} for redis option {key!r}")
        values[key] = int(value)
    return RedisOptions(urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), **values)
