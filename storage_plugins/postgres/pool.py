"""Connections of the ``postgresql://`` backend: the pool, each session's
setup, and psycopg errors turned into dejaq ones."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from dejaq.core.errors import StorageError, StorageUnavailable
from dejaq.storage_plugins.postgres import arrays, sql
from dejaq.storage_plugins.postgres.options import PostgresOptions
from dejaq.storage_plugins.postgres.schema import migrate

Conn = psycopg.AsyncConnection[Any]

# SQLSTATE classes worth a retry: connection exception, transaction rollback
# (deadlock, serialization), insufficient resources, operator intervention
# (shutdown, cancel), system error (I/O); and lock_not_available.
_TRANSIENT = ("08", "40", "53", "57", "58", "55P03")


def storage_error(exc: psycopg.Error) -> StorageError:
    """The dejaq error for a psycopg one: a lost or refused connection, an empty
    pool and transient server conditions are ``StorageUnavailable`` (retry later);
    anything else (a bug, a limit) is a plain ``StorageError``."""
    if isinstance(exc, PoolClosed):
        return StorageUnavailable("postgres storage is closed")
    state = exc.sqlstate
    if state is None:  # raised by the client: connection trouble, pool timeout
        transient = isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    else:
        transient = state.startswith(_TRANSIENT)
    return (StorageUnavailable if transient else StorageError)(f"postgres: {exc}")


class Pool:
    """A psycopg pool of autocommit sessions, filled by ``open`` after migrating."""

    def __init__(self, options: PostgresOptions) -> None:
        self.options = options
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._checking: asyncio.Task[None] | None = None
        self.migrated_from = 0  # the stored format version ``open`` found (0: new)

    async def open(self) -> None:
        # One plain connection first: it migrates, and its failure reads better
        # than a pool's timeout.
        options = self.options
        try:
            conn = await psycopg.AsyncConnection.connect(options.conninfo, autocommit=True)
            async with conn:
                self.migrated_from = await migrate(conn)
        except psycopg.Error as exc:
            raise storage_error(exc) from exc
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            options.conninfo,
            min_size=options.min_size,
            max_size=options.max_size,
            timeout=options.pool_timeout,
            kwargs={"autocommit": True},  # transactions are explicit (conn.transaction())
            configure=self._configure,
            open=False,
            name="dejaq",
        )
        try:
            await pool.open(wait=True, timeout=options.pool_timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise StorageUnavailable(f"postgres: cannot fill the pool: {exc}") from exc
        self._pool = pool

    async def _configure(self, conn: Conn) -> None:
        arrays.register(conn.adapters)
        await conn.execute(sql.SESSION_SETUP)
        if self.options.synchronous_commit is not None:
            await conn.execute(sql.SET_SYNCHRONOUS_COMMIT, (self.options.synchronous_commit,))

    async def close(self) -> None:
        if self._checking is not None:
            self._checking.cancel()
        if self._pool is not None:
            await self._pool.close()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Conn]:
        """A pooled connection (autocommit); psycopg errors become dejaq ones."""
        if self._pool is None:
            raise StorageUnavailable("postgres storage used before open()")
        try:
            async with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            error = storage_error(exc)
            if isinstance(error, StorageUnavailable):
                self._drop_broken()
            raise error from exc

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        """A connection in a transaction: committed at the end, rolled back on any
        error. Pipelined: ``BEGIN`` travels with the first statement and ``COMMIT``
        with the last, so a read-then-write transaction costs two round trips."""
        async with self.connection() as conn, conn.pipeline(), conn.transaction():
            yield conn

    def _drop_broken(self) -> None:
        """After a lost connection the idle ones are likely lost too (a server
        restart): test them all now, so one call fails rather than one per connection."""
        if self._pool is not None and (self._checking is None or self._checking.done()):
            self._checking = asyncio.get_running_loop().create_task(self._check_pool(self._pool))

    @staticmethod
    async def _check_pool(pool: AsyncConnectionPool[Conn]) -> None:
        with contextlib.suppress(psycopg.Error):
            await pool.check()
