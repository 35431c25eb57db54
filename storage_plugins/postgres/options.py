"""The ``postgresql://`` URL: dejaq's own options, and libpq's passed through.

See ``PostgresStorage`` for what each option means.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact

SYNCHRONOUS_COMMIT = ("on", "remote_apply", "remote_write", "local", "off")
# Passed to libpq untouched.
LIBPQ_OPTIONS = (
    "connect_timeout",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "application_name",
    "target_session_attrs",
)


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """A ``postgresql://`` URL read: what libpq gets, and dejaq's own options."""

    conninfo: str  # the URL libpq sees: dejaq's own options removed
    min_size: int = 1
    max_size: int = 10
    pool_timeout: float = 5.0
    synchronous_commit: str | None = None  # None = the server's setting


def _positive(cast: Callable[[str], float]) -> Callable[[str, str], float]:
    def parse(key: str, value: str) -> float:
        try:
            number = cast(value)
        except ValueError:
            number = 0
        if number <= 0:
            raise InvalidArgument(f"bad value {value!r} for postgres option {key!r}: expected > 0")
        return number

    return parse


def _level(key: str, value: str) -> str:
    if value.lower() not in SYNCHRONOUS_COMMIT:
        expected = ", ".join(SYNCHRONOUS_COMMIT)
        raise InvalidArgument(f"bad value {value!r} for postgres option {key!r}: one of {expected}")
    return value.lower()


# dejaq's own options: the field of PostgresOptions each fills
_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "min_size": _positive(int),
    "max_size": _positive(int),
    "pool_timeout": _positive(float),
    "synchronous_commit": _level,
}
_CHECKED_LIBPQ = {"connect_timeout": _positive(int)}


def parse_url(url: str) -> PostgresOptions:
    """Read a ``postgresql://...?option=value`` URL; ``InvalidArgument`` names what is wrong."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise InvalidArgument(f"expected postgresql://user@host:port/database, got {redact(url)!r}")
    fields: dict[str, Any] = {}
    libpq = {"connect_timeout": "5"}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _PARSERS:
            fields[key] = _PARSERS[key](key, value)
        elif key in LIBPQ_OPTIONS:
            if key in _CHECKED_LIBPQ:
                _CHECKED_LIBPQ[key](key, value)
            libpq[key] = value
        else:
            known = ", ".join([*_PARSERS, *LIBPQ_OPTIONS])
            raise InvalidArgument(f"unknown postgres option {key!r}: expected one of {known}")
    conninfo = urlunsplit(parts._replace(query=urlencode(libpq)))
    options = PostgresOptions(conninfo, **fields)
    if options.max_size < options.min_size:
        raise InvalidArgument(f"postgres option max_size must be >= min_size ({options.min_size})")
    return options
