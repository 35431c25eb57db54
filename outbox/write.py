"""Writing a row in the caller's open transaction, through whichever driver
the application uses: psycopg 3 (sync or async), asyncpg, or a SQLAlchemy
``Session`` / ``AsyncSession``. Each is recognised by its class, looked up
only among the modules the application already imported."""

from __future__ import annotations

import sys
from collections.abc import Awaitable
from typing import Any

from dejaq.core.errors import InvalidArgument
from dejaq.outbox import sql
from dejaq.outbox.rows import Row


def _is(conn: object, module: str, *names: str) -> bool:
    found = sys.modules.get(module)
    if found is None:
        return False
    return any(isinstance(conn, getattr(found, name)) for name in names if hasattr(found, name))


def write(conn: Any, row: Row, result: str) -> str | Awaitable[str]:
    """Insert ``row`` through ``conn``; ``result`` for a sync connection, an
    awaitable of it for an async one."""
    if _is(conn, "psycopg", "Connection"):
        conn.execute(sql.INSERT_PSYCOPG, row)
        return result
    if _is(conn, "psycopg", "AsyncConnection"):
        return _awaited(conn.execute(sql.INSERT_PSYCOPG, row), result)
    if _is(conn, "asyncpg.connection", "Connection") or _is(
        conn, "asyncpg.pool", "PoolConnectionProxy"
    ):
        return _awaited(conn.execute(sql.INSERT_ASYNCPG, *row), result)
    if _is(conn, "sqlalchemy.ext.asyncio", "AsyncSession", "AsyncConnection"):
        return _awaited(conn.execute(_text(), _named(row)), result)
    if _is(conn, "sqlalchemy.orm", "Session") or _is(conn, "sqlalchemy.engine", "Connection"):
        conn.execute(_text(), _named(row))
        return result
    raise InvalidArgument(
        f"the outbox writes through a psycopg 3 connection, an asyncpg connection or a"
        f" SQLAlchemy Session, AsyncSession or Connection, not {type(conn).__name__}"
    )


async def _awaited(pending: Awaitable[Any], result: str) -> str:
    await pending
    return result


def _named(row: Row) -> dict[str, Any]:
    return dict(zip(sql.WRITTEN, row, strict=True))


def _text() -> Any:
    from sqlalchemy import text

    return text(sql.INSERT_NAMED)
