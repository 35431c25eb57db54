"""``install``: create or upgrade the outbox schema in the application's database."""

from __future__ import annotations

from dataclasses import dataclass

from dejaq.outbox import sql
from dejaq.outbox.connect import database_errors, psycopg_module


@dataclass(frozen=True)
class Installed:
    before: int | None  # the schema's version found (None: there was none)
    after: int  # its version now


def install(url: str) -> Installed:
    """Create the ``dejaq_outbox`` schema at ``url``, or bring an older one up to
    this dejaq's version, in one transaction. Running it again changes nothing."""
    psycopg = psycopg_module()
    with database_errors(url), psycopg.connect(url) as conn, conn.transaction():
        conn.execute(sql.INSTALL_LOCK)
        conn.execute(sql.CREATE_SCHEMA)
        conn.execute(sql.CREATE_VERSION)
        row = conn.execute(sql.READ_VERSION).fetchone()
        before = None if row is None else int(row[0])
        for version in range(before or 0, len(sql.MIGRATIONS)):
            conn.execute(sql.MIGRATIONS[version])
        after = len(sql.MIGRATIONS)
        if before is None:
            conn.execute(sql.FIRST_VERSION, (after,))
        elif before != after:
            conn.execute(sql.SET_VERSION, (after,))
    return Installed(before, after)
