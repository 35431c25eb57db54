"""A message's key: who the message is for or from (a tenant, a user, a
campaign). Consumers' credit is shared among the keys with due messages, so
one key's backlog never holds up the others (docs/keys.md), and a topic may
limit how many messages of one key are held at once or delivered a second.

A key is a UTF-8 string of at most ``MAX_KEY_BYTES`` bytes without control
characters (it travels as an HTTP header value, ``Dejaq-Key``); the empty
string means no key. The broker, the driver and the CLI check it with
``check_key``, before anything is stored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from dejaq.core.errors import InvalidArgument

MAX_KEY_BYTES: Final = 256

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_BYTES = re.compile(rb"[\x00-\x1f\x7f]")


def check_key(key: str) -> str:
    """``key`` when it may be a message's key; ``InvalidArgument`` saying why not."""
    if not key:
        return key
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"a message key must be UTF-8: {exc.reason}") from exc
    if size > MAX_KEY_BYTES:
        raise InvalidArgument(
            f"a message key is at most {MAX_KEY_BYTES} bytes of UTF-8, not {size}"
        )
    if _CONTROL.search(key):
        raise InvalidArgument("a message key may not hold control characters")
    return key


def key_from_utf8(raw: bytes) -> str:
    """A key read from the wire: ``InvalidArgument`` unless it is UTF-8 and a key."""
    try:
        key = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(
            f"a message key must be UTF-8: {exc.reason} at byte {exc.start}"
        ) from exc
    return check_key(key)


def all_ascii_keys(keys: Sequence[str]) -> bool:
    """Whether every one of ``keys`` is a key of ASCII characters (a byte each),
    checked a column at a time, a pass in C each: a batch's keys are most often
    such. False: some is not, or not a key; ``check_key`` each to tell."""
    joined = "".join(keys)
    return (
        joined.isascii()
        and not _CONTROL.search(joined)
        and max(map(len, keys), default=0) <= MAX_KEY_BYTES
    )


def ascii_keys_from_utf8(raws: Sequence[bytes]) -> list[str] | None:
    """``raws`` read from the wire as keys when every one is ASCII and a key,
    checked a column at a time as ``all_ascii_keys``; None when some is not
    (``key_from_utf8`` each then says which and why)."""
    joined = b"".join(raws)
    if (
        not joined.isascii()
        or _CONTROL_BYTES.search(joined)
        or max(map(len, raws), default=0) > MAX_KEY_BYTES
    ):
        return None
    return list(map(bytes.decode, raws))
