"""A message's headers: string names to string values (a content type, a
schema version, W3C ``traceparent``), set by the producer and handed to the
consumer as they were. Storage keeps them apart from the timeline, as it keeps
payloads, in one encoded value (``encode``): storage never reads them.

Bounds, checked by ``check_headers`` before anything is stored:
- at most ``MAX_HEADERS`` entries and ``MAX_HEADER_BYTES`` bytes of UTF-8 in
  all (names and values);
- a name is an HTTP token (RFC 9110 ``tchar``), so a webhook can send it as an
  HTTP header (``Dejaq-Header-<name>``), and names are unique regardless of
  case;
- a value holds no control character but tab.

The encoded form is a msgpack map (``b""`` for none): one C call to encode or
decode, and the same bytes on every backend.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import msgspec

from dejaq.core.errors import InvalidArgument

MAX_HEADERS: Final = 64
MAX_HEADER_BYTES: Final = 8192

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(dict[str, str])

Headers = Mapping[str, str]


# Sets of names found to keep the name rules (tokens, unique regardless of
# case, not too many), with their length in all. Messages of one source carry
# the same few sets one after another, so the names' regular expressions run
# once a set rather than once a message; the values are checked every time.
_NAME_SETS: dict[tuple[str, ...], int] = {}
_NAME_SETS_AT_MOST = 1024


def check_headers(headers: Headers) -> dict[str, str]:
    """``headers`` as a plain dict when they keep the bounds; ``InvalidArgument`` saying
    which bound they break."""
    names = tuple(headers)
    size = _NAME_SETS.get(names)
    if size is not None:
        try:
            joined = "".join(headers.values())
            if not _BAD_VALUE.search(joined):
                size += len(joined) if joined.isascii() else len(joined.encode("utf-8"))
                if size <= MAX_HEADER_BYTES:
                    return dict(headers)
        except (TypeError, UnicodeEncodeError):
            pass  # a value not a string, or not UTF-8: said by the check below
    out = _check_each(headers)
    if len(_NAME_SETS) < _NAME_SETS_AT_MOST:
        _NAME_SETS[names] = sum(map(len, names))
    return out


def _check_each(headers: Headers) -> dict[str, str]:
    """``check_headers`` a header at a time: the error names the first bad one."""
    if len(headers) > MAX_HEADERS:
        raise InvalidArgument(f"a message has at most {MAX_HEADERS} headers, not {len(headers)}")
    total = 0
    seen: set[str] = set()
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidArgument("header names and values are strings")
        if not _TOKEN.fullmatch(name):
            raise InvalidArgument(f"header name {name!r} is not an HTTP token")
        folded = name.lower()
        if folded in seen:
            raise InvalidArgument(f"header {name!r} is given twice (names ignore case)")
        seen.add(folded)
        if _BAD_VALUE.search(value):
            raise InvalidArgument(f"header {name!r} holds a control character")
        try:
            total += len(name) + len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidArgument(f"header {name!r} is not UTF-8: {exc.reason}") from exc
        out[name] = value
    if total > MAX_HEADER_BYTES:
        raise InvalidArgument(
            f"a message's headers are at most {MAX_HEADER_BYTES} bytes in all, not {total}"
        )
    return out


def encode(headers: Headers | None) -> bytes:
    """The stored form of checked headers; ``b""`` for none."""
    if not headers:
        return b""
    return _encoder.encode(headers if type(headers) is dict else dict(headers))


def decode(raw: bytes | memoryview) -> dict[str, str]:
    """Headers from their stored form (``b""``: none)."""
    if not raw:
        return {}
    return _decoder.decode(raw)


def from_wire(raw: bytes | memoryview) -> bytes:
    """Encoded headers received from a client, checked: the same bytes when they
    decode and keep the bounds; ``InvalidArgument`` otherwise."""
    if not raw:
        return b""
    if len(raw) > MAX_HEADER_BYTES + 4 * MAX_HEADERS + 8:
        raise InvalidArgument(f"a message's headers are at most {MAX_HEADER_BYTES} bytes in all")
    try:
        headers = _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise InvalidArgument(f"a message's headers are not a map of strings: {exc}") from exc
    check_headers(headers)
    return bytes(raw)
