"""The binary array columns of the postgresql:// backend (``postgres.arrays``):
what the server reads back is what was sent, for every column type, edge
values included, and a value a column cannot hold is refused before sending."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dejaq.storage_plugins.postgres import arrays
from tests.postgres_server import PostgresServer

INT8 = st.integers(-(2**63), 2**63 - 1)
INT4 = st.integers(-(2**31), 2**31 - 1)
# PostgreSQL text cannot hold NUL; any other code point it can.
TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))


@pytest.fixture(scope="module")
def conn(postgres_server: PostgresServer) -> Any:
    with psycopg.connect(postgres_server.url(), autocommit=True) as c:
        arrays.register(c.adapters)
        yield c


def echoed(conn: Any, column: list[Any], sql_type: str) -> list[Any]:
    """The column as the server read it, and the type it took it for."""
    row = conn.execute(f"SELECT %s::{sql_type}, pg_typeof(%s)::text", (column, column)).fetchone()
    assert row[1] == sql_type
    return list(row[0])


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    int8s=st.lists(INT8, max_size=50),
    int4s=st.lists(INT4, max_size=50),
    bools=st.lists(st.booleans(), max_size=50),
    texts=st.lists(st.none() | TEXT, max_size=50),
    byteas=st.lists(st.binary(max_size=300), max_size=50),
)
def test_every_column_reads_back_as_sent(
    conn: Any,
    int8s: list[int],
    int4s: list[int],
    bools: list[bool],
    texts: list[str | None],
    byteas: list[bytes],
) -> None:
    assert echoed(conn, arrays.Int8s(int8s), "bigint[]") == int8s
    assert echoed(conn, arrays.Int4s(int4s), "integer[]") == int4s
    assert echoed(conn, arrays.Bools(bools), "boolean[]") == bools
    assert echoed(conn, arrays.Texts(texts), "text[]") == texts
    assert echoed(conn, arrays.Byteas(byteas), "bytea[]") == byteas


def test_a_batch_of_ids_and_payloads_is_unnested_in_order(conn: Any) -> None:
    ids = arrays.Texts(f"id-{i:05d}" for i in range(1000))
    payloads = arrays.Byteas(bytes([i % 256]) * 100 for i in range(1000))
    rows = conn.execute(
        "SELECT i, p FROM unnest(%s::text[], %s::bytea[]) AS u (i, p)", (ids, payloads)
    ).fetchall()
    assert [(i, bytes(p)) for i, p in rows] == list(zip(ids, payloads, strict=True))


def test_a_value_a_column_cannot_hold_is_refused_before_anything_is_sent(conn: Any) -> None:
    # The error the server gives for a value out of range: storage_error makes
    # it a StorageError, as it did when the server refused the value itself.
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        conn.execute("SELECT %s::integer[]", (arrays.Int4s([2**31]),))
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the session is still usable
