"""A row the relay claimed, as read by ``sql.CLAIM``."""

from __future__ import annotations

from typing import NamedTuple


class Claimed(NamedTuple):
    seq: int
    op: str
    topic: str
    msg_id: str
    at_ms: int
    payload: bytes
    key: str
    headers: bytes
    max_deliveries: int
    expires_at_ms: int
    priority: int
