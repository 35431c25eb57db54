"""Every table name and statement of the outbox, in one place.

The outbox lives in the application's own database, in a schema of its own
(``dejaq_outbox``). A row is one operation on a message (schedule, move,
cancel) written in the application's transaction. The relay reads rows in the
order their transactions first wrote (``xid``, then ``seq`` within one): a
transaction that began writing after another committed has a higher ``xid``,
so an operation never overtakes one its transaction could see. Only rows below
the oldest transaction still running (``pg_snapshot_xmin``) are read: no row of
a lower ``xid`` can appear after them.
"""

from __future__ import annotations

SCHEMA = "dejaq_outbox"
ROWS = f"{SCHEMA}.rows"
PARKED = f"{SCHEMA}.parked"
VERSION = f"{SCHEMA}.version"
CHANNEL = "dejaq_outbox"  # NOTIFY channel: a commit that wrote rows wakes the relays

SCHEDULE, MOVE, CANCEL = "schedule", "move", "cancel"

# The columns an application writes, in this order in every INSERT below.
WRITTEN = (
    "op",
    "topic",
    "msg_id",
    "at_ms",
    "payload",
    "key",
    "headers",
    "max_deliveries",
    "expires_at_ms",
    "priority",
)

# Each migration takes the schema from the version before it to its own.
MIGRATIONS: tuple[str, ...] = (
    f"""
    CREATE TABLE {ROWS} (
        seq bigserial PRIMARY KEY,
        xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
        written_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        op text NOT NULL CHECK (op IN ('schedule', 'move', 'cancel')),
        topic text NOT NULL,
        msg_id text NOT NULL,
        at_ms bigint NOT NULL DEFAULT 0,
        payload bytea NOT NULL DEFAULT '',
        key text NOT NULL DEFAULT '',
        headers bytea NOT NULL DEFAULT '',
        max_deliveries integer NOT NULL DEFAULT 0,
        expires_at_ms bigint NOT NULL DEFAULT 0,
        priority integer NOT NULL DEFAULT 0
    );
    CREATE INDEX rows_order ON {ROWS} (xid, seq);
    CREATE INDEX rows_by_message ON {ROWS} (topic, msg_id, xid, seq);
    CREATE TABLE {PARKED} (
        seq bigint PRIMARY KEY,
        written_at timestamptz NOT NULL,
        parked_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        reason text NOT NULL,
        op text NOT NULL,
        topic text NOT NULL,
        msg_id text NOT NULL,
        at_ms bigint NOT NULL,
        payload bytea NOT NULL,
        key text NOT NULL,
        headers bytea NOT NULL,
        max_deliveries integer NOT NULL,
        expires_at_ms bigint NOT NULL,
        priority integer NOT NULL
    );
    CREATE FUNCTION {SCHEMA}.notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', '');
        RETURN NULL;
    END $$;
    CREATE TRIGGER rows_notify AFTER INSERT ON {ROWS}
        FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.notify();
    """,
)

CREATE_SCHEMA = f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"
CREATE_VERSION = f"CREATE TABLE IF NOT EXISTS {VERSION} (version integer NOT NULL)"
# One installer at a time: a second waits, then finds the work done.
INSTALL_LOCK = "SELECT pg_advisory_xact_lock(hashtext('dejaq_outbox install'))"
READ_VERSION = f"SELECT version FROM {VERSION}"
FIRST_VERSION = f"INSERT INTO {VERSION} (version) VALUES (%s)"
SET_VERSION = f"UPDATE {VERSION} SET version = %s"
HAS_SCHEMA = f"SELECT to_regclass('{VERSION}') IS NOT NULL"

_COLUMNS = ", ".join(WRITTEN)
# The application's write, in each driver's placeholder style.
INSERT_PSYCOPG = f"INSERT INTO {ROWS} ({_COLUMNS}) VALUES ({', '.join(['%s'] * len(WRITTEN))})"
INSERT_ASYNCPG = (
    f"INSERT INTO {ROWS} ({_COLUMNS})"
    f" VALUES ({', '.join(f'${i}' for i in range(1, len(WRITTEN) + 1))})"
)
INSERT_NAMED = f"INSERT INTO {ROWS} ({_COLUMNS}) VALUES ({', '.join(':' + c for c in WRITTEN)})"

# The relay's claim: the oldest committed rows, none another relay holds, and
# none with an earlier row of the same message still waiting (held by another
# relay), so the operations on one message apply in order.
CLAIM = f"""
SELECT seq, op, topic, msg_id, at_ms, payload, key, headers, max_deliveries,
       expires_at_ms, priority
FROM {ROWS} r
WHERE r.xid < pg_snapshot_xmin(pg_current_snapshot())
  AND NOT EXISTS (
      SELECT 1 FROM {ROWS} e
      WHERE e.topic = r.topic AND e.msg_id = r.msg_id AND (e.xid, e.seq) < (r.xid, r.seq)
  )
ORDER BY r.xid, r.seq
LIMIT %s
FOR UPDATE SKIP LOCKED
"""
# Rows handed over: gone, each with its lag in seconds from its write to the
# hand-over; from its transaction's commit where the server keeps commit times
# (track_commit_timestamp = on).
DELETE_DONE = f"""
DELETE FROM {ROWS} WHERE seq = ANY(%s)
RETURNING extract(epoch FROM clock_timestamp() - written_at)::float8
"""
DELETE_DONE_FROM_COMMIT = f"""
DELETE FROM {ROWS} WHERE seq = ANY(%s)
RETURNING extract(
    epoch FROM clock_timestamp() - coalesce(pg_xact_commit_timestamp(xmin), written_at)
)::float8
"""
COMMIT_TIMES = "SELECT current_setting('track_commit_timestamp')::boolean"
PARK = f"""
WITH gone AS (DELETE FROM {ROWS} WHERE seq = %s RETURNING *)
INSERT INTO {PARKED} (seq, written_at, reason, op, topic, msg_id, at_ms, payload, key,
                      headers, max_deliveries, expires_at_ms, priority)
SELECT seq, written_at, %s, op, topic, msg_id, at_ms, payload, key, headers,
       max_deliveries, expires_at_ms, priority
FROM gone
"""
LISTEN = f"LISTEN {CHANNEL}"
BEGIN, COMMIT, ROLLBACK = "BEGIN", "COMMIT", "ROLLBACK"

STATUS = f"""
SELECT (SELECT count(*) FROM {ROWS}),
       (SELECT extract(epoch FROM clock_timestamp() - min(written_at))::float8 FROM {ROWS}),
       (SELECT count(*) FROM {PARKED})
"""
PARKED_ROWS = f"""
SELECT seq, op, topic, msg_id, reason, extract(epoch FROM parked_at)::float8
FROM {PARKED} ORDER BY seq LIMIT %s
"""
