"""A transactional outbox: schedule dejaq messages in the application's own
PostgreSQL transaction.

::

    import dejaq.outbox

    with psycopg.connect(APP_DB) as conn, conn.transaction():
        conn.execute("INSERT INTO orders (id) VALUES (%s)", (order_id,))
        dejaq.outbox.schedule(conn, "reminders", b"order 17", delay_ms=30 * 60_000)

The message is written to the ``dejaq_outbox`` schema in the same
transaction as the order: a rollback leaves neither, a commit leaves both, and
a relay (``dejaq outbox relay`` or ``dejaq broker --outbox``) hands it to
dejaq after commit, even after a crash. ``conn`` is a psycopg 3 connection,
an asyncpg connection, or a SQLAlchemy ``Session``/``AsyncSession``/
``Connection``; with an async one each call returns an awaitable.
``dejaq outbox install URL`` (or ``install(url)``) creates the schema first.
"""

from __future__ import annotations

from typing import Any

from dejaq.core.headers import Headers
from dejaq.outbox import rows
from dejaq.outbox.schema import Installed, install
from dejaq.outbox.status import OutboxStatus, ParkedRow, status
from dejaq.outbox.write import write

__all__ = [
    "Installed",
    "OutboxStatus",
    "ParkedRow",
    "cancel",
    "install",
    "move",
    "schedule",
    "status",
]


def schedule(
    conn: Any,
    topic: str,
    payload: bytes,
    *,
    at_ms: int | None = None,
    delay_ms: int | None = None,
    id: str = "",
    key: str = "",
    headers: Headers | None = None,
    max_deliveries: int = 0,
    expires_at_ms: int = 0,
    priority: int = 0,
) -> Any:
    """Schedule ``payload`` on ``topic`` at ``at_ms`` (epoch ms) or ``delay_ms``
    from now (neither: now), in ``conn``'s open transaction. Returns the
    message's id (``id``, or one chosen now that every retry of the relay
    reuses); an awaitable of it on an async connection. A bad field raises
    ``InvalidArgument`` before anything is written."""
    msg_id, row = rows.schedule_row(
        topic,
        payload,
        at_ms=at_ms,
        delay_ms=delay_ms,
        id=id,
        key=key,
        headers=headers,
        max_deliveries=max_deliveries,
        expires_at_ms=expires_at_ms,
        priority=priority,
    )
    return write(conn, row, msg_id)


def move(
    conn: Any, topic: str, id: str, *, at_ms: int | None = None, delay_ms: int | None = None
) -> Any:
    """Move message ``id`` of ``topic`` to ``at_ms`` (or ``delay_ms`` from now),
    in ``conn``'s open transaction: applied after every earlier row of the
    same message. Returns ``id`` (an awaitable of it on an async connection)."""
    return write(conn, rows.move_row(topic, id, at_ms, delay_ms), id)


def cancel(conn: Any, topic: str, id: str) -> Any:
    """Cancel message ``id`` of ``topic`` in ``conn``'s open transaction
    (nothing to cancel, as when it was delivered already, is no error).
    Returns ``id`` (an awaitable of it on an async connection)."""
    return write(conn, rows.cancel_row(topic, id), id)
