"""Creating and migrating the ``postgresql://`` schema.

``dejaq_schema`` records the migrations applied, in ``sql.MIGRATIONS`` order:
the highest is the database's stored format version (``Storage.migrate``).
``open`` runs them under an advisory lock, so brokers starting together
migrate one after the other; a schema newer than this dejaq is refused.
"""

from __future__ import annotations

from typing import Any

import psycopg

from dejaq.core.errors import StorageError
from dejaq.storage_plugins.postgres import sql


async def migrate(conn: psycopg.AsyncConnection[Any]) -> int:
    """Bring the schema to the newest version, one migration at a time; the
    version it was at (0: a new database)."""
    async with conn.transaction():
        await conn.execute(sql.LOCK_SCHEMA)
        await conn.execute(sql.CREATE_SCHEMA_TABLE)
        row = await (await conn.execute(sql.SCHEMA_VERSION)).fetchone()
        assert row is not None, "an aggregate always returns a row"
        version = row[0]
        if version > len(sql.MIGRATIONS):
            raise StorageError(
                f"postgres: the database holds dejaq's stored format version {version},"
                f" newer than {len(sql.MIGRATIONS)}, the newest this dejaq reads:"
                " run a dejaq that reads it"
            )
        for number, steps in enumerate(sql.MIGRATIONS[version:], start=version + 1):
            for statement in steps:
                await conn.execute(statement)
            await conn.execute(sql.RECORD_MIGRATION, (number,))
    return int(version)
