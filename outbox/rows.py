"""One outbox row, checked and built from what the application asked.

Checked here, before the application's transaction holds a bad row: the
fields ``Outgoing`` takes, the same bounds the broker applies. What only the
topic can judge (it exists, its max payload) is judged by the broker when the
relay hands the row over; a row it refuses is parked with the reason.
"""

from __future__ import annotations

import secrets
from typing import Any

from dejaq.core import headers as header_codec
from dejaq.core.clock import now_ms
from dejaq.core.due_time import DUE_TIME, EXPIRY
from dejaq.core.errors import InvalidArgument
from dejaq.core.keys import check_key
from dejaq.outbox import sql

MAX_ID_BYTES = 256  # as the broker's
MAX_TOPIC_BYTES = 256

Row = tuple[Any, ...]  # the values of sql.WRITTEN, in order


def new_id() -> str:
    """An id chosen when the row is written, so each retry of the relay hands
    over the same message (produce is idempotent by id): time-ordered like the
    broker's own, with 80 random bits."""
    return f"{now_ms():011x}-ob-{secrets.token_hex(10)}"


def _text(what: str, value: object, most: int, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be text, not {type(value).__name__}")
    if not value and not empty_ok:
        raise InvalidArgument(f"{what} must not be empty")
    if len(value.encode("utf-8", "surrogatepass")) > most:
        raise InvalidArgument(f"{what} is longer than {most} bytes")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise InvalidArgument(f"{what} {value!r} holds a control character")
    return value


def _whole(what: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{what} must be a whole number, not {type(value).__name__}")
    return value


def due_at(at_ms: int | None, delay_ms: int | None) -> int:
    """The due time: ``at_ms``, or now plus ``delay_ms`` (neither: now)."""
    if at_ms is not None and delay_ms is not None:
        raise InvalidArgument("give at_ms or delay_ms, not both")
    if at_ms is not None:
        at = _whole("at_ms", at_ms)
    else:
        delay = _whole("delay_ms", delay_ms or 0)
        if delay < 0:
            raise InvalidArgument(f"delay_ms {delay} must not be negative")
        at = now_ms() + delay
    why = DUE_TIME.error(at)
    if why is not None:
        raise InvalidArgument(why)
    return at


def schedule_row(
    topic: str,
    payload: bytes,
    *,
    at_ms: int | None,
    delay_ms: int | None,
    id: str,
    key: str,
    headers: header_codec.Headers | None,
    max_deliveries: int,
    expires_at_ms: int,
    priority: int,
) -> tuple[str, Row]:
    """The id and the row of a schedule."""
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise InvalidArgument(f"payload must be bytes, not {type(payload).__name__}")
    msg_id = _text("message id", id, MAX_ID_BYTES, empty_ok=True) or new_id()
    at = due_at(at_ms, delay_ms)
    for what, value in (("max_deliveries", max_deliveries), ("priority", priority)):
        if _whole(what, value) < 0:
            raise InvalidArgument(f"{what} {value} must not be negative")
    why = EXPIRY.error(_whole("expires_at_ms", expires_at_ms))
    if why is not None:
        raise InvalidArgument(why)
    encoded = header_codec.encode(header_codec.check_headers(headers)) if headers else b""
    row = (
        sql.SCHEDULE,
        _text("topic", topic, MAX_TOPIC_BYTES),
        msg_id,
        at,
        bytes(payload),
        check_key(key),
        encoded,
        max_deliveries,
        expires_at_ms,
        priority,
    )
    return msg_id, row


def move_row(topic: str, id: str, at_ms: int | None, delay_ms: int | None) -> Row:
    at = due_at(at_ms, delay_ms)
    return (
        sql.MOVE,
        _text("topic", topic, MAX_TOPIC_BYTES),
        _text("message id", id, MAX_ID_BYTES),
        at,
        b"",
        "",
        b"",
        0,
        0,
        0,
    )


def cancel_row(topic: str, id: str) -> Row:
    return (
        sql.CANCEL,
        _text("topic", topic, MAX_TOPIC_BYTES),
        _text("message id", id, MAX_ID_BYTES),
        0,
        b"",
        "",
        b"",
        0,
        0,
        0,
    )
