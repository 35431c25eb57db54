"""Every SQL statement of the ``postgresql://`` backend, in one place.

Tables (prefixed ``dejaq_`` so they can share a database): ``dejaq_topics``
(name, settings as JSON), ``dejaq_messages`` (the metadata timeline, one small
row per message), ``dejaq_payloads`` (the bytes, apart: a mutation never
rewrites a payload) and ``dejaq_schema`` (one row per migration applied).

Indexes, all partial so each stays as small as what it serves:

- ``(topic, ts) WHERE NOT dead`` — leasing and ``next_due`` for the whole
  topic: an ordered scan that stops after ``LIMIT`` unlocked rows.
- ``(topic, bucket, ts) WHERE NOT dead`` — the same for a set of buckets, one
  bounded seek per bucket (``LATERAL``). Postgres 15 cannot merge the
  per-bucket ranges of ``bucket = ANY(...)`` in ``ts`` order: with 200k due
  messages that plan sorts them all (200 ms a lease of 100) where the
  per-bucket seeks read at most ``buckets x limit`` rows (1.7 ms for one
  bucket, 6 ms for 64).
- ``(topic, id) WHERE dead`` — listing, redriving and purging the dead.
- ``(topic, owner) WHERE owner IS NOT NULL`` — ``release`` of one consumer.

Names and ids use the ``"C"`` collation whatever the database's: dead messages
page by id in code-point order, as in every other backend, and comparisons
are plain byte compares.

Plans. Every hot statement is an ordered index scan that stops at its
``LIMIT``. Without statistics (a new table; a topic grown since the last
``ANALYZE``) the planner underestimates the due rows and prefers a bitmap
scan, which loses the index order and sorts every due row: 45 ms instead of
0.8 ms a lease of 100 out of 100k due. Our sessions therefore run with
``enable_bitmapscan = off``: none of these statements gains from one.
tests/storage_plugins/test_postgres.py checks the plans on such a table.

Rows are claimed with ``FOR UPDATE SKIP LOCKED``: two brokers leasing the same
buckets at once each take rows the other has not locked, instead of queueing
behind each other. Batches travel as arrays (``unnest``), so every statement's
text is constant and psycopg prepares it once per connection.
"""

from __future__ import annotations

SCHEMA_TABLE = "dejaq_schema"
DATA_TABLES = ("dejaq_topics", "dejaq_messages", "dejaq_payloads")

# Advisory lock keys (two int4 keys: a class of our own, then an object).
_LOCK_CLASS_SCHEMA = 0x646A7100
_LOCK_CLASS_TOPIC = 0x646A7101

# Taken by open(): brokers starting together migrate one after the other.
LOCK_SCHEMA = f"SELECT pg_advisory_xact_lock({_LOCK_CLASS_SCHEMA:d}, 0)"
CREATE_SCHEMA_TABLE = f"""CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""
SCHEMA_VERSION = f"SELECT coalesce(max(version), 0) FROM {SCHEMA_TABLE}"
# (version)
RECORD_MIGRATION = f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (%s)"

# Migration N (1-based) is MIGRATIONS[N - 1]; append, never edit a released one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE dejaq_topics (
            name text COLLATE "C" PRIMARY KEY,
            settings jsonb NOT NULL,
            created_at_ms bigint NOT NULL
        )""",
        """CREATE TABLE dejaq_messages (
            topic text COLLATE "C" NOT NULL,
            id text COLLATE "C" NOT NULL,
            bucket integer NOT NULL,
            ts bigint NOT NULL,
            version bigint NOT NULL,
            deliveries integer NOT NULL,
            owner text COLLATE "C",
            max_deliveries integer NOT NULL,
            expires_at bigint NOT NULL,
            dead boolean NOT NULL,
            PRIMARY KEY (topic, id)
        )""",
        "CREATE INDEX dejaq_messages_time ON dejaq_messages (topic, ts) WHERE NOT dead",
        "CREATE INDEX dejaq_messages_due ON dejaq_messages (topic, bucket, ts) WHERE NOT dead",
        "CREATE INDEX dejaq_messages_dead ON dejaq_messages (topic, id) WHERE dead",
        """CREATE INDEX dejaq_messages_owner ON dejaq_messages (topic, owner)
            WHERE owner IS NOT NULL""",
        """CREATE TABLE dejaq_payloads (
            topic text COLLATE "C" NOT NULL,
            id text COLLATE "C" NOT NULL,
            payload bytea NOT NULL,
            PRIMARY KEY (topic, id)
        )""",
    ),
)

PING = "SELECT 1"
# Run on every new connection: see "Plans" above.
SESSION_SETUP = "SET enable_bitmapscan = off"
# (value): the session's commit durability, validated by the URL reader
SET_SYNCHRONOUS_COMMIT = "SELECT set_config('synchronous_commit', %s, false)"

# Only insert creates rows: it holds the topic's lock shared, delete_topic holds
# it exclusive, so no insert can land rows of a topic being deleted. The lock
# is its own statement: a statement's snapshot is taken before it waits, so
# only the statements after the lock see a deletion that committed meanwhile.
# (topic)
LOCK_TOPIC_SHARED = f"SELECT pg_advisory_xact_lock_shared({_LOCK_CLASS_TOPIC:d}, hashtext(%s))"
LOCK_TOPIC = f"SELECT pg_advisory_xact_lock({_LOCK_CLASS_TOPIC:d}, hashtext(%s))"

# -- topics -------------------------------------------------------------------

# (name, settings JSON, created_at_ms)
INSERT_TOPIC = """INSERT INTO dejaq_topics (name, settings, created_at_ms)
    VALUES (%s, %s::jsonb, %s) ON CONFLICT (name) DO NOTHING"""
_TOPIC_COLUMNS = "name, settings::text, created_at_ms"
GET_TOPIC = f"SELECT {_TOPIC_COLUMNS} FROM dejaq_topics WHERE name = %s"
LIST_TOPICS = f"SELECT {_TOPIC_COLUMNS} FROM dejaq_topics ORDER BY name"
TOPIC_EXISTS = "SELECT 1 FROM dejaq_topics WHERE name = %s"
# (name): after LOCK_TOPIC; the count of topics deleted (0 or 1)
DELETE_TOPIC = """WITH t AS (DELETE FROM dejaq_topics WHERE name = %(topic)s RETURNING 1),
    m AS (DELETE FROM dejaq_messages WHERE topic = %(topic)s),
    p AS (DELETE FROM dejaq_payloads WHERE topic = %(topic)s)
    SELECT count(*) FROM t"""

# -- messages -----------------------------------------------------------------

# (topic, ids, buckets, ts, max_deliveries, expires_at, payloads as arrays):
# after LOCK_TOPIC_SHARED. Ids are unique within the batch (sql_base.plan_insert).
# Returns (topic exists, ids stored): an id already stored is left untouched.
# COPY into a temporary table, then INSERT ... SELECT, measured no faster here
# (42k msgs/s either way, batches of 1,000: maintaining the indexes dominates),
# so the one statement stays.
INSERT_MESSAGES = """WITH t AS (SELECT name FROM dejaq_topics WHERE name = %(topic)s),
    new AS (
        INSERT INTO dejaq_messages
            (topic, id, bucket, ts, version, deliveries, owner, max_deliveries, expires_at, dead)
        SELECT t.name, u.id, u.bucket, u.ts, 1, 0, NULL, u.md, u.expires_at, false
        FROM t, unnest(%(ids)s::text[], %(buckets)s::int[], %(ts)s::int8[], %(md)s::int[],
                       %(expires_at)s::int8[]) AS u (id, bucket, ts, md, expires_at)
        ON CONFLICT (topic, id) DO NOTHING
        RETURNING id),
    stored AS (
        INSERT INTO dejaq_payloads (topic, id, payload)
        SELECT %(topic)s, new.id, u.payload
        FROM new JOIN unnest(%(ids)s::text[], %(payloads)s::bytea[]) AS u (id, payload)
            USING (id))
    SELECT EXISTS (SELECT FROM t), array(SELECT id FROM new)"""

# Column order of DUE rows follows sql_base.Due, then the payload. A payload is
# fetched by a subquery per row: with a join the planner may prefer hashing
# the whole payload table to the few (at most limit) index lookups needed.
_DUE_COLUMNS = "m.id, m.ts, m.version, m.deliveries, m.max_deliveries, m.expires_at"
_PAYLOAD_OF = """(SELECT p.payload FROM dejaq_payloads AS p
    WHERE p.topic = %(topic)s AND p.id = {row}.id)"""
# (topic, now, limit): the earliest due rows of the whole topic, locked.
CLAIM_DUE = f"""SELECT c.*, {_PAYLOAD_OF.format(row="c")} FROM (
        SELECT {_DUE_COLUMNS} FROM dejaq_messages AS m
        WHERE m.topic = %(topic)s AND NOT m.dead AND m.ts <= %(now)s
        ORDER BY m.ts LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED) AS c
    ORDER BY c.ts"""
# (topic, buckets, now, window, seen): the ids of the earliest due rows of some
# buckets, not locked (one bounded seek per bucket), minus those already tried.
DUE_IN_BUCKETS = """SELECT c.id FROM unnest(%(buckets)s::int[]) AS b (bucket)
    CROSS JOIN LATERAL (
        SELECT id, ts FROM dejaq_messages
        WHERE topic = %(topic)s AND bucket = b.bucket AND NOT dead AND ts <= %(now)s
            AND id <> ALL (%(seen)s::text[])
        ORDER BY ts LIMIT %(window)s) AS c
    ORDER BY c.ts LIMIT %(window)s"""
# (topic, ids, now, limit): lock those still due (rechecked under the lock).
CLAIM_IDS = f"""SELECT c.*, {_PAYLOAD_OF.format(row="c")} FROM (
        SELECT {_DUE_COLUMNS} FROM dejaq_messages AS m
        WHERE m.topic = %(topic)s AND m.id = ANY (%(ids)s::text[])
            AND NOT m.dead AND m.ts <= %(now)s
        ORDER BY m.ts LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED) AS c
    ORDER BY c.ts"""
# (topic, keep, until, owner, kill, now, drop): one lease pass's writes
APPLY_LEASE = """WITH kept AS (
        UPDATE dejaq_messages SET ts = %(until)s, owner = %(owner)s,
            deliveries = deliveries + 1, version = version + 1
        WHERE topic = %(topic)s AND id = ANY (%(keep)s::text[])),
    killed AS (
        UPDATE dejaq_messages SET dead = true, owner = NULL, ts = %(now)s, version = version + 1
        WHERE topic = %(topic)s AND id = ANY (%(kill)s::text[])),
    dropped AS (
        DELETE FROM dejaq_messages WHERE topic = %(topic)s AND id = ANY (%(drop)s::text[])),
    dropped_payloads AS (
        DELETE FROM dejaq_payloads WHERE topic = %(topic)s AND id = ANY (%(drop)s::text[]))
    SELECT 1"""

# (topic)
NEXT_DUE = """SELECT ts FROM dejaq_messages WHERE topic = %(topic)s AND NOT dead
    ORDER BY ts LIMIT 1"""
# (topic, buckets)
NEXT_DUE_IN_BUCKETS = """SELECT min(c.ts) FROM unnest(%(buckets)s::int[]) AS b (bucket)
    CROSS JOIN LATERAL (
        SELECT ts FROM dejaq_messages
        WHERE topic = %(topic)s AND bucket = b.bucket AND NOT dead
        ORDER BY ts LIMIT 1) AS c"""

# (topic, ids): column order follows sql_base.State after the id. Locked in
# id order, so two settles of overlapping batches cannot deadlock.
LOCK_STATES = """SELECT id, ts, version, deliveries, owner, max_deliveries, dead
    FROM dejaq_messages WHERE topic = %(topic)s AND id = ANY (%(ids)s::text[])
    ORDER BY id FOR UPDATE"""
# (topic, deleted, ids, ts, versions, owners, deads): a plan of sql_base
APPLY_STATES = """WITH gone AS (
        DELETE FROM dejaq_messages WHERE topic = %(topic)s AND id = ANY (%(deleted)s::text[])),
    gone_payloads AS (
        DELETE FROM dejaq_payloads WHERE topic = %(topic)s AND id = ANY (%(deleted)s::text[])),
    changed AS (
        UPDATE dejaq_messages AS m
        SET ts = u.ts, version = u.version, owner = u.owner, dead = u.dead
        FROM unnest(%(ids)s::text[], %(ts)s::int8[], %(versions)s::int8[], %(owners)s::text[],
                    %(deads)s::bool[]) AS u (id, ts, version, owner, dead)
        WHERE m.topic = %(topic)s AND m.id = u.id)
    SELECT 1"""

# Column order of MESSAGE rows follows core.model.Message.
_MESSAGE_COLUMNS = f"""m.id, m.ts, {_PAYLOAD_OF.format(row="m")}, m.version, m.deliveries,
    m.owner, m.bucket, m.max_deliveries, m.expires_at, m.dead"""
# (topic, id)
GET_MESSAGE = f"""SELECT {_MESSAGE_COLUMNS} FROM dejaq_messages AS m
    WHERE m.topic = %(topic)s AND m.id = %(id)s"""
# (topic, after_id, limit)
LIST_DEAD = f"""SELECT {_MESSAGE_COLUMNS} FROM dejaq_messages AS m
    WHERE m.topic = %(topic)s AND m.dead AND m.id > %(after_id)s
    ORDER BY m.id LIMIT %(limit)s"""

# (topic, owner, now)
RELEASE_OWNER = """UPDATE dejaq_messages SET ts = %(now)s, owner = NULL, version = version + 1
    WHERE topic = %(topic)s AND owner = %(owner)s AND NOT dead"""
# (topic, now): whether the topic exists, then the counts
COUNTS = """SELECT EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s),
        count(*) FILTER (WHERE dead),
        count(*) FILTER (WHERE NOT dead AND ts <= %(now)s),
        count(*) FILTER (WHERE NOT dead AND ts > %(now)s AND owner IS NOT NULL),
        count(*) FILTER (WHERE NOT dead AND ts > %(now)s AND owner IS NULL)
    FROM dejaq_messages WHERE topic = %(topic)s"""
_REDRIVE = """UPDATE dejaq_messages
    SET dead = false, deliveries = 0, expires_at = 0, ts = %(at)s, version = version + 1
    WHERE topic = %(topic)s AND dead"""
# (topic, at)
REDRIVE_ALL = _REDRIVE
# (topic, at, ids)
REDRIVE_IDS = _REDRIVE + " AND id = ANY (%(ids)s::text[])"
# (topic, died_before): the count of messages deleted
PURGE_DEAD = """WITH gone AS (
        DELETE FROM dejaq_messages WHERE topic = %(topic)s AND dead AND ts < %(died_before)s
        RETURNING id),
    gone_payloads AS (
        DELETE FROM dejaq_payloads WHERE topic = %(topic)s AND id IN (SELECT id FROM gone))
    SELECT count(*) FROM gone"""
