"""``status``: what waits in an outbox and what is parked there."""

from __future__ import annotations

from dataclasses import dataclass

from dejaq.outbox import sql
from dejaq.outbox.connect import database_errors, psycopg_module


@dataclass(frozen=True)
class ParkedRow:
    seq: int
    op: str
    topic: str
    id: str
    reason: str
    parked_at_s: float  # epoch seconds


@dataclass(frozen=True)
class OutboxStatus:
    waiting: int  # rows not handed over yet
    oldest_age_s: float | None  # the oldest waiting row's age (None: none waits)
    parked: int  # rows that can never be handed over, kept with their reason
    parked_rows: list[ParkedRow]  # the first of them, oldest first


def status(url: str, limit: int = 20) -> OutboxStatus:
    """The outbox at ``url``: rows waiting, the oldest one's age, the parked rows
    (the first ``limit`` listed)."""
    psycopg = psycopg_module()
    with database_errors(url), psycopg.connect(url, autocommit=True) as conn:
        waiting, oldest, parked = conn.execute(sql.STATUS).fetchone()
        listed = [
            ParkedRow(int(s), op, topic, msg_id, reason, float(at))
            for s, op, topic, msg_id, reason, at in conn.execute(sql.PARKED_ROWS, (limit,))
        ]
    return OutboxStatus(int(waiting), oldest, int(parked), listed)
