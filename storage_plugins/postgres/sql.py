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
- ``(topic, key, bucket, ts) WHERE NOT dead`` — a lane's rows (a key in one
  bucket): its earliest, its due count, a fair pass's share over some buckets.
- ``(topic, key, ts) WHERE NOT dead AND key <> ''`` — a fair pass's share of
  a key over a whole topic, and the key's head and due count before it: one
  ordered seek across its buckets that stops at the share (the seek per
  bucket read up to buckets x share rows and sorted them: 16,000 rows for a
  share of 1,000 over 16 buckets). Keyed rows only,
  so a topic without keys does not maintain it.
- ``(topic, id) WHERE dead`` — listing, redriving and purging the dead.
- ``(topic, owner) WHERE owner IS NOT NULL`` — ``release`` of one consumer.
- ``(topic, bucket, id)`` — ``scan``: a page is one ordered seek that stops
  at its ``LIMIT``, so a topic reads in time linear in its size. Sorting the
  bucket's rows for each page instead made a bucket's read quadratic.

Names and ids use the ``"C"`` collation whatever the database's: dead messages
page by id in code-point order, as in every other backend, and comparisons
are plain byte compares.

Plans. Every hot statement seeks its rows: an ordered index scan that stops
at its ``LIMIT``, a key lookup per id, or a ``ctid``. Each has cheaper-looking
alternatives whenever the planner's estimates are off, and they are off in
three ordinary situations, so every session runs with ``SESSION_SETUP``:

- No statistics yet (a new table; a topic grown since the last ``ANALYZE``):
  the due rows are underestimated and a bitmap scan, which loses the index
  order and sorts every due row, looks best (45 ms instead of 0.8 ms a
  lease of 100 out of 100k due).
- Statistics gathered before a topic existed (every new topic): a plan for
  that topic's name estimates it at one row, so reading all of it through
  the primary key and sorting looks as cheap as seeking: every lease,
  ``next_due`` and settle then reads the whole topic (measured: 420 ms
  lateness at 1k msgs/s).
- A plan made while the table was nearly empty: a sequential scan per
  row looks cheapest. A prepared statement's generic plan keeps it as the
  table grows (8 s a lease at 50k messages, measured), so plans are custom,
  made for each execution (``plan_cache_mode = force_custom_plan``).

Hence bitmap scans, sequential scans and explicit sorts are disabled (their
cost made prohibitive): none of these statements needs one where a seek
exists, and a statement that must sort (merging buckets) still does. That
prohibitive cost would in turn make every such statement look worth JIT
compiling (500 ms a call, measured), and no statement here is: ``jit`` is off.
tests/storage_plugins/test_postgres.py checks the plans in all three cases.

Rows are claimed with ``FOR UPDATE SKIP LOCKED``: two brokers leasing the same
buckets at once each take rows the other has not locked, instead of queueing
behind each other. Batches travel as arrays (``unnest``), so every statement's
text is constant and prepared once per connection.
"""

from __future__ import annotations

from dejaq.core.model import DEFAULT_DEDUP_WINDOW_MS

SCHEMA_TABLE = "dejaq_schema"
DATA_TABLES = (
    "dejaq_topics", "dejaq_messages", "dejaq_payloads", "dejaq_tombstones", "dejaq_counts",
    "dejaq_lanes",
)  # fmt: skip

# Advisory lock keys (two int4 keys: a class of our own, then an object).
_LOCK_CLASS_SCHEMA = 0x646A7100
_LOCK_CLASS_TOPIC = 0x646A7101
_LOCK_CLASS_COUNTS = 0x646A7102

# Taken by open(): brokers starting together migrate one after the other.
LOCK_SCHEMA = f"SELECT pg_advisory_xact_lock({_LOCK_CLASS_SCHEMA:d}, 0)"
CREATE_SCHEMA_TABLE = f"""CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""
SCHEMA_VERSION = f"SELECT coalesce(max(version), 0) FROM {SCHEMA_TABLE}"
# (version)
RECORD_MIGRATION = f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (%s)"

# A statement trigger's function: a dejaq_counts row per topic of what the
# statement changed (``rows``: topic, live, dead, one per row changed), none
# for a topic it left as it was (an update that killed or redrove nothing).
_COUNT_FUNCTION = """CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO dejaq_counts (topic, live, dead)
            SELECT topic, sum(live), sum(dead) FROM ({rows}) AS changed
            GROUP BY topic HAVING sum(live) <> 0 OR sum(dead) <> 0;
        RETURN NULL;
    END $$"""

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
    (
        # The ids of deleted messages, kept for the topic's dedup window.
        """CREATE TABLE dejaq_tombstones (
            topic text COLLATE "C" NOT NULL,
            id text COLLATE "C" NOT NULL,
            deleted_at bigint NOT NULL,
            PRIMARY KEY (topic, id)
        )""",
        # Partial, on a condition only the purge states: a key lookup of a
        # tombstone (topic, id) can never walk a topic's tombstones through it,
        # whatever the statistics say.
        """CREATE INDEX dejaq_tombstones_age ON dejaq_tombstones (topic, deleted_at)
            WHERE deleted_at >= 0""",
    ),
    (
        # Priority topics: each message's priority (0 on a timeline). A constant
        # default: PostgreSQL adds the column without rewriting the table.
        "ALTER TABLE dejaq_messages ADD COLUMN priority integer NOT NULL DEFAULT 0",
    ),
    (
        # Scans (SCAN_BUCKET): a bucket's ids in order, live and dead. The
        # pattern operator class, so that only this index serves the scan.
        """CREATE INDEX dejaq_messages_bucket
            ON dejaq_messages (topic, bucket, id text_pattern_ops)""",
    ),
    (
        # Live and dead messages counted per topic (COUNTS, CENSUS), so that
        # no count reads every message of a topic. Each write statement adds
        # a row of what it changed (statement triggers over its transition
        # tables), in its own transaction: added rows never wait on one
        # another, where one row per topic would queue every writer of the
        # topic behind the last one's commit. FOLD_COUNTS sums them up now
        # and then.
        """CREATE TABLE dejaq_counts (
            topic text COLLATE "C" NOT NULL,
            live bigint NOT NULL,
            dead bigint NOT NULL
        )""",
        "CREATE INDEX dejaq_counts_topic ON dejaq_counts (topic)",
        _COUNT_FUNCTION.format(
            name="dejaq_count_inserted",
            rows="SELECT topic, (NOT dead)::int AS live, dead::int AS dead FROM dejaq_new",
        ),
        _COUNT_FUNCTION.format(
            name="dejaq_count_deleted",
            rows="SELECT topic, -(NOT dead)::int AS live, -dead::int AS dead FROM dejaq_old",
        ),
        _COUNT_FUNCTION.format(
            name="dejaq_count_updated",
            rows="""SELECT topic, (NOT dead)::int AS live, dead::int AS dead FROM dejaq_new
                UNION ALL
                SELECT topic, -(NOT dead)::int, -dead::int FROM dejaq_old""",
        ),
        """CREATE TRIGGER dejaq_counted_in AFTER INSERT ON dejaq_messages
            REFERENCING NEW TABLE AS dejaq_new
            FOR EACH STATEMENT EXECUTE FUNCTION dejaq_count_inserted()""",
        """CREATE TRIGGER dejaq_counted_out AFTER DELETE ON dejaq_messages
            REFERENCING OLD TABLE AS dejaq_old
            FOR EACH STATEMENT EXECUTE FUNCTION dejaq_count_deleted()""",
        """CREATE TRIGGER dejaq_counted_change AFTER UPDATE ON dejaq_messages
            REFERENCING OLD TABLE AS dejaq_old NEW TABLE AS dejaq_new
            FOR EACH STATEMENT EXECUTE FUNCTION dejaq_count_updated()""",
        # What the table holds already, counted under the triggers' table
        # lock (taken above, held to the commit): no write falls in between.
        """INSERT INTO dejaq_counts (topic, live, dead)
            SELECT topic, count(*) FILTER (WHERE NOT dead), count(*) FILTER (WHERE dead)
            FROM dejaq_messages GROUP BY topic""",
    ),
    (
        # Keys and headers. Constant defaults: both columns are added without
        # rewriting a table, and every message stored before has neither.
        """ALTER TABLE dejaq_messages ADD COLUMN key text COLLATE "C" NOT NULL DEFAULT ''""",
        "ALTER TABLE dejaq_payloads ADD COLUMN headers bytea NOT NULL DEFAULT ''::bytea",
        # Fair passes (KEY_LEASE): a key's earliest due messages, a seek per
        # bucket, never reading past another key's backlog.
        """CREATE INDEX dejaq_messages_key ON dejaq_messages (topic, key, bucket, ts)
            WHERE NOT dead""",
        # A lane is one key's live messages in one bucket; its head is at or
        # before the earliest of them: early, never late. A write that puts a
        # keyed message at a time lowers its lane's head (the _LOWER
        # statements, in the write's own statement); a pass that took from a
        # lane sets its head again (FIX_LANES) or drops it when it is empty.
        """CREATE TABLE dejaq_lanes (
            topic text COLLATE "C" NOT NULL,
            bucket integer NOT NULL,
            key text COLLATE "C" NOT NULL,
            head bigint NOT NULL,
            PRIMARY KEY (topic, bucket, key)
        )""",
        "CREATE INDEX dejaq_lanes_due ON dejaq_lanes (topic, bucket, head)",
    ),
    (
        # Fair passes over a whole topic (KEY_LEASE): a key's earliest due
        # messages across every bucket, one ordered seek that stops at the
        # key's share. Keyed messages only: a topic without keys pays nothing.
        """CREATE INDEX dejaq_messages_keyed ON dejaq_messages (topic, key, ts)
            WHERE NOT dead AND key <> ''""",
    ),
)

# The lanes of the rows of CTE {rows} (topic, bucket, key, ts) lowered to their
# times: created when missing, a head never raised. In (bucket, key) order, so
# two writers lock shared lanes in one order.
_LOWER = """INSERT INTO dejaq_lanes (topic, bucket, key, head)
        SELECT r.topic, r.bucket, r.key, min(r.ts) FROM {rows} AS r WHERE r.key <> ''
        GROUP BY r.topic, r.bucket, r.key ORDER BY r.bucket, r.key
        ON CONFLICT (topic, bucket, key) DO UPDATE SET head = excluded.head
            WHERE dejaq_lanes.head > excluded.head"""

PING = "SELECT 1"
# The server's clock now (not the transaction's start), in microseconds.
SERVER_TIME_US = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8"
# The storage's identity: the database and when its schema was created (to the
# microsecond), written once by the first migration and never changed.
IDENTITY = f"""SELECT current_database(), applied_at::text FROM {SCHEMA_TABLE} WHERE version = 1"""
# Run on every new connection: see "Plans" above.
SESSION_SETUP = """SELECT set_config('enable_bitmapscan', 'off', false),
    set_config('enable_seqscan', 'off', false),
    set_config('enable_sort', 'off', false),
    set_config('plan_cache_mode', 'force_custom_plan', false),
    set_config('jit', 'off', false)"""
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
# (payload, topic, id)
SET_PAYLOAD = "UPDATE dejaq_payloads SET payload = %s WHERE topic = %s AND id = %s"
# (settings JSON, name, created_at_ms)
UPDATE_TOPIC = """UPDATE dejaq_topics SET settings = %s::jsonb
    WHERE name = %s AND created_at_ms = %s"""
_TOPIC_COLUMNS = "name, settings::text, created_at_ms"
GET_TOPIC = f"SELECT {_TOPIC_COLUMNS} FROM dejaq_topics WHERE name = %s"
LIST_TOPICS = f"SELECT {_TOPIC_COLUMNS} FROM dejaq_topics ORDER BY name"
TOPIC_EXISTS = "SELECT 1 FROM dejaq_topics WHERE name = %s"
TOPIC_BUCKET_COUNT = "SELECT (settings ->> 'buckets')::int FROM dejaq_topics WHERE name = %s"
# (name): after LOCK_TOPIC; the count of topics deleted (0 or 1)
DELETE_TOPIC = """WITH t AS (DELETE FROM dejaq_topics WHERE name = %(topic)s RETURNING 1),
    m AS (DELETE FROM dejaq_messages WHERE topic = %(topic)s),
    p AS (DELETE FROM dejaq_payloads WHERE topic = %(topic)s),
    g AS (DELETE FROM dejaq_tombstones WHERE topic = %(topic)s),
    l AS (DELETE FROM dejaq_lanes WHERE topic = %(topic)s)
    SELECT count(*) FROM t"""

# Whether deletes of the topic %(topic)s leave tombstones (its dedup window is
# not 0; a topic stored before the setting existed has the default).
_BURIES = f"""EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s
    AND coalesce((settings ->> 'dedup_window_ms')::int8, {DEFAULT_DEDUP_WINDOW_MS:d}) <> 0)"""
# The tombstones of the ids in CTE ``{gone}``, deleted at %(now)s.
_BURY = """INSERT INTO dejaq_tombstones (topic, id, deleted_at)
        SELECT %(topic)s, g.id, %(now)s FROM {gone} AS g WHERE {buries}
        ON CONFLICT (topic, id) DO UPDATE SET deleted_at = excluded.deleted_at"""

# -- messages -----------------------------------------------------------------

# The tombstone of id ``u.id`` in topic {topic}, found by its key: a lateral
# subquery with a LIMIT is never flattened into a join over the topic's
# tombstones (and dejaq_tombstones_age, partial, is out of its reach).
_TOMBSTONE_OF = """SELECT 1 AS hit FROM dejaq_tombstones AS g
            WHERE g.topic = {topic} AND g.id = u.id LIMIT 1"""

# (topic, ids, buckets, ts, max_deliveries, expires_at, priorities, payloads as arrays):
# after LOCK_TOPIC_SHARED. Ids are unique within the batch (sql_base.plan_insert).
# Returns (topic exists, ids stored): an id already stored, or tombstoned, is
# left untouched.
# COPY into a temporary table, then INSERT ... SELECT, measured no faster here
# (42k msgs/s either way, batches of 1,000: maintaining the indexes dominates),
# so the one statement stays.
INSERT_MESSAGES = f"""WITH t AS (SELECT name FROM dejaq_topics WHERE name = %(topic)s),
    new AS (
        INSERT INTO dejaq_messages
            (topic, id, bucket, ts, version, deliveries, owner, max_deliveries, expires_at, dead,
             priority, key)
        SELECT t.name, u.id, u.bucket, u.ts, 1, 0, NULL, u.md, u.expires_at, false, u.priority,
            u.key
        FROM t, unnest(%(ids)s::text[], %(buckets)s::int[], %(ts)s::int8[], %(md)s::int[],
                       %(expires_at)s::int8[], %(priorities)s::int[], %(keys)s::text[])
                AS u (id, bucket, ts, md, expires_at, priority, key)
            LEFT JOIN LATERAL ({_TOMBSTONE_OF.format(topic="t.name")}) AS g ON true
        WHERE g.hit IS NULL
        ON CONFLICT (topic, id) DO NOTHING
        RETURNING topic, id, bucket, key, ts),
    stored AS (
        INSERT INTO dejaq_payloads (topic, id, payload, headers)
        SELECT %(topic)s, new.id, u.payload, u.headers
        FROM new JOIN unnest(%(ids)s::text[], %(payloads)s::bytea[], %(headers)s::bytea[])
            AS u (id, payload, headers) USING (id)),
    lowered AS ({_LOWER.format(rows="new")})
    SELECT EXISTS (SELECT FROM t), array(SELECT id FROM new)"""

# (topic, ids): the ids of the array that have a tombstone.
TOMBSTONED_IDS = """SELECT g.id FROM dejaq_tombstones AS g
    WHERE g.topic = %(topic)s AND g.id = ANY (%(ids)s::text[])"""
# A debounce (Storage.insert with REPLACE / EXTEND) over rows LOCK_STATES locked
# in this transaction: (topic, ids, buckets, ts, md, expires_at, priorities,
# keys, payloads, headers) replace every field the producer gives, (topic,
# moved, moved_ts) move a due time only; both clear a run-out lease's owner,
# keep deliveries and move the version on, and lower the lanes of what changed
# (a head may be early, never late).
DEBOUNCE = f"""WITH replaced AS (
        UPDATE dejaq_messages AS m
        SET bucket = u.bucket, ts = u.ts, version = m.version + 1, owner = NULL,
            max_deliveries = u.md, expires_at = u.expires_at, priority = u.priority, key = u.key
        FROM unnest(%(ids)s::text[], %(buckets)s::int[], %(ts)s::int8[], %(md)s::int[],
                    %(expires_at)s::int8[], %(priorities)s::int[], %(keys)s::text[])
            AS u (id, bucket, ts, md, expires_at, priority, key)
        WHERE m.topic = %(topic)s AND m.id = u.id
        RETURNING m.topic, m.id, m.bucket, m.key, m.ts),
    rewritten AS (
        UPDATE dejaq_payloads AS p SET payload = u.payload, headers = u.headers
        FROM unnest(%(ids)s::text[], %(payloads)s::bytea[], %(headers)s::bytea[])
            AS u (id, payload, headers)
        WHERE p.topic = %(topic)s AND p.id = u.id),
    moved AS (
        UPDATE dejaq_messages AS m
        SET ts = u.ts, version = m.version + 1, owner = NULL
        FROM unnest(%(moved)s::text[], %(moved_ts)s::int8[]) AS u (id, ts)
        WHERE m.topic = %(topic)s AND m.id = u.id
        RETURNING m.topic, m.id, m.bucket, m.key, m.ts),
    changed AS (SELECT * FROM replaced UNION ALL SELECT * FROM moved),
    lowered AS ({_LOWER.format(rows="changed")})
    SELECT count(*) FROM changed"""

# (topic, ids): run after INSERT_MESSAGES, in its transaction, with a snapshot
# of its own. An insert that met an id being deleted (an ack, a cancel, an
# at-most-once delivery in flight) waited for that delete and then stored the
# id: its tombstone, committed with the delete, was not in the insert's
# snapshot. Such messages are taken out again here (a duplicate); no other
# stored message has a tombstone. Returns the ids taken out. One key lookup per
# id in the tombstones, and in the messages for the few found there (LATERAL
# ... LIMIT 1: never a join over the topic's rows).
UNDO_TOMBSTONED = f"""WITH doomed AS MATERIALIZED (
        SELECT m.tid, m.id,
            (SELECT p.ctid FROM dejaq_payloads AS p
                WHERE p.topic = %(topic)s AND p.id = m.id) AS payload_tid
        FROM unnest(%(ids)s::text[]) AS u (id)
        CROSS JOIN LATERAL ({_TOMBSTONE_OF.format(topic="%(topic)s")}) AS g
        CROSS JOIN LATERAL (
            SELECT m.ctid AS tid, m.id FROM dejaq_messages AS m
            WHERE m.topic = %(topic)s AND m.id = u.id LIMIT 1) AS m
        WHERE {_BURIES}),
    gone AS (
        DELETE FROM dejaq_messages WHERE ctid = ANY (ARRAY(SELECT tid FROM doomed))),
    gone_payloads AS (
        DELETE FROM dejaq_payloads WHERE ctid = ANY (ARRAY(SELECT payload_tid FROM doomed)))
    SELECT array(SELECT id FROM doomed)"""

# -- lease ----------------------------------------------------------------------
#
# One pass is ONE statement, whatever the number of buckets and messages:
#
# 1. ``candidates``: where (``ctid``) the earliest ``window`` due rows are,
#    unlocked — from the whole topic (an ordered scan of ``(topic, ts)``) or
#    from a set of buckets (a bounded seek per bucket on ``(topic, bucket,
#    ts)``, merged).
# 2. ``locked`` / ``claimed``: each candidate fetched by its ``ctid`` and locked
#    ``FOR UPDATE SKIP LOCKED``, at most ``limit`` of them; the due check is
#    redone under the lock (on the newest version, should another transaction
#    have changed the row meanwhile), and the fate of each decided (below).
# 3. ``moved`` / ``dropped``: the writes, by the ``ctid`` of the row just
#    locked (``buried``: tombstones of the dropped ids, with a dedup window).
#    A row another transaction changed after our snapshot is not written, and
#    so not returned: it stays for the next pass.
#    Rows are only ever addressed by ``ctid`` (a TID scan) after step 1, so no
#    estimate can turn a lookup into a scan of the topic.
# 4. One row per written message (with its payload, also by ``ctid``), each
#    carrying the number of candidates and whether the topic exists; at least
#    one row, so an empty pass needs no second round trip.
#
# The fate is rules.lease_fate spelled in SQL (tests/storage_plugins/
# test_postgres.py pins the two together): with md the message's own
# max_deliveries, else the topic's (rules.effective_max_deliveries), a message
# delivered md times already or past its expires_at is killed
# (rules.dies_on_lease), one with md = 1 is dropped on delivery
# (rules.at_most_once), any other is kept under a lease.

_CANDIDATES_OF_TOPIC = """SELECT ctid, ts FROM dejaq_messages
        WHERE topic = %(topic)s AND NOT dead AND ts <= %(bound)s
        ORDER BY ts LIMIT %(window)s"""
_CANDIDATES_OF_BUCKETS = """SELECT c.ctid, c.ts FROM unnest(%(buckets)s::int[]) AS b (bucket)
        CROSS JOIN LATERAL (
            SELECT ctid, ts FROM dejaq_messages
            WHERE topic = %(topic)s AND bucket = b.bucket AND NOT dead AND ts <= %(bound)s
            ORDER BY ts LIMIT %(window)s) AS c
        ORDER BY c.ts LIMIT %(window)s"""
_LEASE = """WITH keyed AS MATERIALIZED (SELECT {keyed} AS due),
    heads AS MATERIALIZED ({heads}),
    candidates AS MATERIALIZED (
        SELECT c.ctid AS tid, row_number() OVER () AS n FROM ({candidates}) AS c
        WHERE NOT (SELECT due FROM keyed)),
    locked AS MATERIALIZED (
        SELECT c.n, m.* FROM candidates AS c CROSS JOIN LATERAL (
            SELECT m.ctid AS tid, m.id, m.ts, m.version, m.deliveries, m.expires_at, m.priority,
                m.key,
                CASE WHEN m.max_deliveries <> 0 THEN m.max_deliveries
                    ELSE %(max_deliveries)s::int END AS md,
                (SELECT p.ctid FROM dejaq_payloads AS p
                    WHERE p.topic = %(topic)s AND p.id = m.id) AS payload_tid
            FROM dejaq_messages AS m
            WHERE m.ctid = c.tid AND m.topic = %(topic)s AND NOT m.dead AND m.ts <= %(bound)s
            FOR UPDATE SKIP LOCKED) AS m
        LIMIT %(limit)s),
    claimed AS MATERIALIZED (
        SELECT l.*, CASE
                WHEN (l.md <> 0 AND l.deliveries >= l.md)
                    OR (l.expires_at <> 0 AND l.expires_at <= greatest(%(now)s, l.ts)) THEN 'kill'
                WHEN l.md = 1 THEN 'drop'
                ELSE 'keep' END AS fate
        FROM locked AS l),
    moved AS (
        UPDATE dejaq_messages AS m SET
            dead = c.fate = 'kill',
            ts = CASE WHEN c.fate = 'kill' THEN %(now)s ELSE %(until)s END,
            owner = CASE WHEN c.fate = 'kill' THEN NULL ELSE %(owner)s END,
            deliveries = m.deliveries + CASE WHEN c.fate = 'kill' THEN 0 ELSE 1 END,
            version = m.version + 1
        FROM claimed AS c WHERE m.ctid = c.tid AND c.fate <> 'drop'
        RETURNING c.n, c.fate, m.id, c.ts, m.version, m.deliveries, m.priority, m.key,
            c.payload_tid),
    dropped AS (
        DELETE FROM dejaq_messages AS m USING claimed AS c
        WHERE m.ctid = c.tid AND c.fate = 'drop'
        RETURNING c.n, c.fate, m.id, c.ts, m.version + 1, m.deliveries + 1, m.priority, m.key,
            c.payload_tid),
    dropped_payloads AS (
        DELETE FROM dejaq_payloads AS p USING dropped AS d WHERE p.ctid = d.payload_tid),
    buried AS ({bury}),
    written AS (SELECT * FROM moved UNION ALL SELECT * FROM dropped)
    SELECT s.candidates, s.topic_exists, s.keyed, s.head_keys, s.head_buckets, s.heads, s.dues,
        w.n, w.fate, w.id, w.ts, w.version,
        w.deliveries, w.priority, w.key,
        CASE WHEN w.fate <> 'kill' THEN
            (SELECT p.payload FROM dejaq_payloads AS p WHERE p.ctid = w.payload_tid) END,
        CASE WHEN w.fate <> 'kill' THEN
            (SELECT p.headers FROM dejaq_payloads AS p WHERE p.ctid = w.payload_tid) END
    FROM (SELECT (SELECT count(*) FROM candidates) AS candidates,
            EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s) AS topic_exists,
            (SELECT due FROM keyed) AS keyed,
            ARRAY(SELECT key FROM heads) AS head_keys,
            ARRAY(SELECT bucket FROM heads) AS head_buckets,
            ARRAY(SELECT head FROM heads) AS heads,
            ARRAY(SELECT due FROM heads) AS dues) AS s
        LEFT JOIN written AS w ON true"""
# Whether a pass must share by key: a lane of the asked buckets has its head
# due (a seek per bucket on dejaq_lanes_due), and the topic is no priority
# topic (which takes by rank alone). A topic without keys has no lane: its
# passes are the statements below, as before keys.
_ANY_LANE_DUE = """EXISTS (SELECT FROM dejaq_lanes
        WHERE topic = %(topic)s AND {buckets} AND head <= %(bound)s)
    AND NOT EXISTS (SELECT FROM dejaq_topics
        WHERE name = %(topic)s AND settings ->> 'kind' = 'priority')"""
# The buckets a fair pass asks: %(buckets)s, or (NULL) every bucket of the topic.
_ASKED = """SELECT unnest(coalesce(%(buckets)s::int[], ARRAY(
        SELECT generate_series(0, (settings ->> 'buckets')::int - 1)
        FROM dejaq_topics WHERE name = %(topic)s))) AS bucket"""
# (topic, bound, buckets or NULL): the lanes of the asked buckets whose head
# is due as (key, bucket, earliest due ts or NULL, due count up to
# LANE_COUNT), then the unkeyed messages' earliest due time as ("", NULL,
# ts, NULL) when there is one: a seek per lane (that stops at LANE_COUNT)
# and per asked bucket on dejaq_messages_key. A lane's head may be early (a
# pass leaves it so while its key has more due); the seek gives its true
# earliest, so the earliest keys go first whatever the heads, and NULL names
# a lane with nothing due, to be set again. A key's count, when all its
# lanes were counted in full, lets the pass plan its steps in one.
#
# A lane's rows are read as a range of (key, bucket, ts) in that order, which
# dejaq_messages_key alone serves: with equalities on key and bucket the
# planner may take dejaq_messages_due in ts order instead, filtering out
# every other key's row before the lane's (measured: 110 ms a pass, and 1.6 s
# for setting the lanes again, beside a backlog of 200k messages of one key).
_LANE_ROWS = """topic = %(topic)s AND NOT dead
                AND (key, bucket, ts) >= ({key}, {bucket}, {low})
                AND (key, bucket, ts) <= ({key}, {bucket}, {high})"""
_LANE_ORDER = "ORDER BY key, bucket, ts"
_MIN_TS = "(-9223372036854775808)::int8"
_MAX_TS = "9223372036854775807::int8"
_UNKEYED_DUE = _LANE_ROWS.format(key="''", bucket="a.bucket", low=_MIN_TS, high="%(bound)s")
_KEY_DUE = _LANE_ROWS.format(key="l.key", bucket="l.bucket", low=_MIN_TS, high="%(bound)s")
_KEY_LIVE = _LANE_ROWS.format(key="u.key", bucket="u.bucket", low=_MIN_TS, high=_MAX_TS)
LANE_COUNT = 8
FAIR_HEADS = f"""WITH asked AS MATERIALIZED ({_ASKED})
    SELECT l.key, l.bucket, d.head, d.due
    FROM dejaq_lanes AS l CROSS JOIN LATERAL (
        SELECT min(r.ts) AS head, count(*) AS due FROM (
            SELECT ts FROM dejaq_messages
            WHERE {_KEY_DUE}
            {_LANE_ORDER} LIMIT {LANE_COUNT:d}) AS r) AS d
    WHERE l.topic = %(topic)s AND l.bucket = ANY (ARRAY(SELECT bucket FROM asked))
        AND l.head <= %(bound)s
    UNION ALL
    SELECT '', NULL, h.ts, NULL FROM (SELECT min(c.ts) AS ts FROM asked AS a CROSS JOIN LATERAL (
            SELECT ts FROM dejaq_messages
            WHERE {_UNKEYED_DUE}
            {_LANE_ORDER} LIMIT 1) AS c) AS h
    WHERE h.ts IS NOT NULL"""
# A key ``w.key``'s due rows over a whole topic, in (key, ts) order: only
# dejaq_messages_keyed serves that (see KEY_LEASE).
_KEY_WHOLE = f"""topic = %(topic)s AND NOT dead AND key <> ''
                AND (key, ts) >= (w.key, {_MIN_TS}) AND (key, ts) <= (w.key, %(bound)s)"""
# (topic, bound): FAIR_HEADS for a pass over a whole topic, with each lane's
# key's earliest due ts and due count (up to LANE_COUNT) in place of the
# lane's: one seek a key across its buckets on dejaq_messages_keyed, where a
# seek a lane on dejaq_messages_key walked the rows that earlier passes
# leased out of a backlog's lanes, still in that index under their old due
# time until a vacuum (a lane's entries die in the order the backlog is
# leased across lanes, not in the lane's own: measured, 2,640 dead rows
# fetched for 64 lanes of 8 due, 11 ms a pass). A key's lanes with nothing
# due are then set again only once the key has nothing due (its head NULL).
FAIR_KEY_HEADS = f"""WITH asked AS MATERIALIZED ({_ASKED}),
    lanes AS MATERIALIZED (
        SELECT l.key, l.bucket FROM dejaq_lanes AS l
        WHERE l.topic = %(topic)s AND l.bucket = ANY (ARRAY(SELECT bucket FROM asked))
            AND l.head <= %(bound)s),
    keys AS MATERIALIZED (
        SELECT w.key, d.head, d.due FROM (SELECT DISTINCT key FROM lanes) AS w
        CROSS JOIN LATERAL (
            SELECT min(r.ts) AS head, count(*) AS due FROM (
                SELECT ts FROM dejaq_messages
                WHERE {_KEY_WHOLE}
                ORDER BY key, ts LIMIT {LANE_COUNT:d}) AS r) AS d)
    SELECT l.key, l.bucket, k.head, k.due FROM lanes AS l
    CROSS JOIN LATERAL (SELECT head, due FROM keys WHERE keys.key = l.key LIMIT 1) AS k
    UNION ALL
    SELECT '', NULL, h.ts, NULL FROM (SELECT min(c.ts) AS ts FROM asked AS a
        CROSS JOIN LATERAL (
            SELECT ts FROM dejaq_messages
            WHERE {_UNKEYED_DUE}
            {_LANE_ORDER} LIMIT 1) AS c) AS h
    WHERE h.ts IS NOT NULL"""
_HEADS_IF_KEYED = f"""SELECT * FROM ({FAIR_HEADS}) AS h WHERE (SELECT due FROM keyed)"""
_KEY_HEADS_IF_KEYED = f"""SELECT * FROM ({FAIR_KEY_HEADS}) AS h WHERE (SELECT due FROM keyed)"""
_NO_HEADS = """SELECT NULL::text AS key, NULL::int AS bucket, NULL::int8 AS head,
    NULL::int8 AS due WHERE false"""
# (topic, now, bound, window, limit, until, owner, max_deliveries [, buckets]):
# rows (candidates, topic exists, keyed, the due lanes as FAIR_HEADS's rows
# in four arrays [key, bucket, head, due], then per message written: its rank
# among the candidates, fate, id, due ts, version, deliveries, priority, key,
# payload, headers). When ``keyed``, nothing was taken: the pass is the
# caller's to share (KEY_LEASE), from the lanes it returned (no second round
# trip for them).
_LEASE_BURY = _BURY.format(gone="dropped", buries=_BURIES)
_EVERY_BUCKET = """bucket = ANY (ARRAY(
        SELECT generate_series(0, (settings ->> 'buckets')::int - 1)
        FROM dejaq_topics WHERE name = %(topic)s))"""
LEASE_TOPIC = _LEASE.format(
    keyed=_ANY_LANE_DUE.format(buckets=_EVERY_BUCKET),
    heads=_KEY_HEADS_IF_KEYED,
    candidates=_CANDIDATES_OF_TOPIC,
    bury=_LEASE_BURY,
)
LEASE_BUCKETS = _LEASE.format(
    keyed=_ANY_LANE_DUE.format(buckets="bucket = ANY (%(buckets)s::int[])"),
    heads=_HEADS_IF_KEYED,
    candidates=_CANDIDATES_OF_BUCKETS,
    bury=_LEASE_BURY,
)
# One step of a fair pass: each key's earliest ``n`` due rows, read one of
# two ways. A key of ``whole_keys`` (a pass over the whole topic): one seek
# on dejaq_messages_keyed in time order across every bucket, that stops at
# ``n`` (the row comparison on (key, ts) and its order, which only that
# index serves, keep the planner off the indexes that would read other
# keys' rows). A key of ``keys`` (the unkeyed messages, or a pass over some
# buckets): a seek per (key, bucket) on dejaq_messages_key that stops at
# ``n``, the key's first ``n`` of those by time. (topic, now, bound, keys,
# buckets, ns [one element per key and bucket], whole_keys, whole_ns,
# window, limit, until, owner, max_deliveries): rows as LEASE_*'s.

_CANDIDATES_OF_KEYS = f"""SELECT c.ctid, c.ts FROM (
            SELECT c.ctid, c.ts, l.n, row_number() OVER (PARTITION BY l.key ORDER BY c.ts) AS r
            FROM unnest(%(keys)s::text[], %(buckets)s::int[], %(ns)s::int[])
                AS l (key, bucket, n)
            CROSS JOIN LATERAL (
                SELECT ctid, ts FROM dejaq_messages
                WHERE {_KEY_DUE}
                {_LANE_ORDER} LIMIT l.n) AS c) AS c
        WHERE c.r <= c.n
        UNION ALL
        SELECT c.ctid, c.ts FROM unnest(%(whole_keys)s::text[], %(whole_ns)s::int[]) AS w (key, n)
        CROSS JOIN LATERAL (
            SELECT ctid, ts FROM dejaq_messages
            WHERE {_KEY_WHOLE}
            ORDER BY key, ts LIMIT w.n) AS c"""
KEY_LEASE = _LEASE.format(
    keyed="false", heads=_NO_HEADS, candidates=_CANDIDATES_OF_KEYS, bury=_LEASE_BURY
)
# (topic, buckets, keys): the lanes a fair pass found with nothing due (its key
# yielded less than asked, or the lane's seek found nothing), locked, those another
# transaction holds skipped (it is lowering them: left as they are, early is
# safe). FIX_LANES then, in a statement of its own (a snapshot taken once the
# locks are held, so it sees every message a lowering writer committed),
# sets each one's head to its earliest live message, or drops it when empty.
LOCK_LANES = """SELECT l.bucket, l.key FROM unnest(%(buckets)s::int[], %(keys)s::text[])
        AS u (bucket, key)
    CROSS JOIN LATERAL (SELECT bucket, key FROM dejaq_lanes
        WHERE topic = %(topic)s AND bucket = u.bucket AND key = u.key
        FOR UPDATE SKIP LOCKED) AS l"""
FIX_LANES = f"""WITH fixed AS MATERIALIZED (
        SELECT u.bucket, u.key, (SELECT ts FROM dejaq_messages
                WHERE {_KEY_LIVE}
                {_LANE_ORDER} LIMIT 1) AS head
        FROM unnest(%(buckets)s::int[], %(keys)s::text[]) AS u (bucket, key)),
    gone AS (DELETE FROM dejaq_lanes AS l USING fixed AS f
        WHERE l.topic = %(topic)s AND l.bucket = f.bucket AND l.key = f.key AND f.head IS NULL)
    UPDATE dejaq_lanes AS l SET head = f.head FROM fixed AS f
    WHERE l.topic = %(topic)s AND l.bucket = f.bucket AND l.key = f.key
        AND f.head IS NOT NULL"""

# (topic [, buckets]): (topic exists, the smallest live timestamp or NULL)
NEXT_DUE = """SELECT EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s),
    (SELECT ts FROM dejaq_messages WHERE topic = %(topic)s AND NOT dead
        ORDER BY ts LIMIT 1)"""
NEXT_DUE_IN_BUCKETS = """SELECT EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s),
    (SELECT min(c.ts) FROM unnest(%(buckets)s::int[]) AS b (bucket)
        CROSS JOIN LATERAL (
            SELECT ts FROM dejaq_messages
            WHERE topic = %(topic)s AND bucket = b.bucket AND NOT dead
            ORDER BY ts LIMIT 1) AS c)"""

# -- promote (priority topics) ----------------------------------------------------
#
# One statement, whatever the number of buckets, shaped as a lease pass: of the
# oldest ``window`` live rows with 0 <= ts <= now (not-before or nack delay
# come, lease run out; ranks are negative) — from the whole topic or merged
# from a bounded seek per bucket — up to ``limit`` locked ``FOR UPDATE SKIP
# LOCKED`` and rechecked, then moved to their rank, unowned, version + 1. The rank is
# core.priority.rank; its step, the topic's creation time and the base are
# parameters from Python. The caller's view of the topic (creation time and
# settings as stored) must still be the stored one, or nothing is written:
# ``matched`` false, the caller reads the topic again.

_AVAILABLE = "NOT dead AND ts >= 0 AND ts <= %(now)s"
_AVAILABLE_OF_TOPIC = f"""SELECT ctid, ts FROM dejaq_messages
        WHERE topic = %(topic)s AND {_AVAILABLE}
        ORDER BY ts LIMIT %(window)s"""
_AVAILABLE_OF_BUCKETS = f"""SELECT c.ctid, c.ts FROM unnest(%(buckets)s::int[]) AS b (bucket)
        CROSS JOIN LATERAL (
            SELECT ctid, ts FROM dejaq_messages
            WHERE topic = %(topic)s AND bucket = b.bucket AND {_AVAILABLE}
            ORDER BY ts LIMIT %(window)s) AS c
        ORDER BY c.ts LIMIT %(window)s"""
_PROMOTE = """WITH t AS MATERIALIZED (
        SELECT FROM dejaq_topics WHERE name = %(topic)s
            AND created_at_ms = %(created_at)s AND settings = %(settings)s::jsonb),
    candidates AS MATERIALIZED (
        SELECT c.ctid AS tid FROM ({candidates}) AS c WHERE EXISTS (SELECT FROM t)),
    locked AS MATERIALIZED (
        SELECT m.tid FROM candidates AS c CROSS JOIN LATERAL (
            SELECT m.ctid AS tid FROM dejaq_messages AS m
            WHERE m.ctid = c.tid AND m.topic = %(topic)s AND NOT m.dead
                AND m.ts >= 0 AND m.ts <= %(now)s
            FOR UPDATE SKIP LOCKED) AS m
        LIMIT %(limit)s),
    promoted AS (
        UPDATE dejaq_messages AS m SET
            ts = m.priority * %(step)s::int8 + (m.ts - %(created_at)s::int8) - %(base)s::int8,
            owner = NULL,
            version = m.version + 1
        FROM locked AS l WHERE m.ctid = l.tid
        RETURNING 1)
    SELECT EXISTS (SELECT FROM t), (SELECT count(*) FROM candidates),
        (SELECT count(*) FROM promoted)"""
# (topic, created_at, settings JSON as stored, now, window, limit, step, base
# [, buckets]): (matched, candidates, promoted)
PROMOTE_TOPIC = _PROMOTE.format(candidates=_AVAILABLE_OF_TOPIC)
PROMOTE_BUCKETS = _PROMOTE.format(candidates=_AVAILABLE_OF_BUCKETS)

# -- settle, move, cancel -------------------------------------------------------
#
# Read and lock the rows (one statement), plan in Python (sql_base, rules),
# write the plan (one statement); an ack first tries ACK_HELD (below). Rows
# are found one key lookup per id (LATERAL): ``id = ANY (...)`` lets
# PostgreSQL 15 settle for the topic's range of the primary key and filter
# every row of the topic by id, which it does whenever its statistics miss
# the topic (a new one) — 40 ms a call at 100k messages. The writes address
# the locked rows by ``ctid``.

# (topic, ids): rows (ctid, payload ctid, id, then the columns of
# sql_base.RowState), locked in the order of ids (sorted by the caller, so two
# settles of overlapping batches cannot deadlock); then one row of NULLs when
# the topic does not exist.
LOCK_STATES = """SELECT m.* FROM unnest(%(ids)s::text[]) AS u (id)
    CROSS JOIN LATERAL (
        SELECT m.ctid::text,
            (SELECT p.ctid::text FROM dejaq_payloads AS p
                WHERE p.topic = %(topic)s AND p.id = m.id),
            m.id, m.ts, m.version, m.deliveries, m.owner, m.max_deliveries, m.dead
        FROM dejaq_messages AS m WHERE m.topic = %(topic)s AND m.id = u.id
        FOR UPDATE) AS m
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
    WHERE NOT EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s)"""
# (topic, now, deleted, deleted_payloads, tids, ts, versions, owners, deads): a
# plan of sql_base over rows LOCK_STATES locked in this transaction, by ctid;
# the deleted leave tombstones (deleted at now) when the topic has a window.
APPLY_STATES = f"""WITH gone AS (
        DELETE FROM dejaq_messages WHERE ctid = ANY (%(deleted)s::text[]::tid[]) RETURNING id),
    buried AS ({_BURY.format(gone="gone", buries=_BURIES)}),
    gone_payloads AS (
        DELETE FROM dejaq_payloads WHERE ctid = ANY (%(deleted_payloads)s::text[]::tid[])),
    changed AS (
        UPDATE dejaq_messages AS m
        SET ts = u.ts, version = u.version, deliveries = u.deliveries, owner = u.owner,
            dead = u.dead
        FROM unnest(%(tids)s::text[]::tid[], %(ts)s::int8[], %(versions)s::int8[],
                    %(deliveries)s::int4[], %(owners)s::text[], %(deads)s::bool[])
            AS u (tid, ts, version, deliveries, owner, dead)
        WHERE m.ctid = u.tid
        RETURNING m.topic, m.bucket, m.key, m.ts, m.dead),
    lowered AS ({_LOWER.format(rows="(SELECT * FROM changed WHERE NOT dead)")})
    SELECT 1"""

# (topic, owner, now, ids, versions): an ack in one statement, for what it
# almost always is — every message still held by ``owner`` at the version
# given. Each row is found by its key alone (LATERAL ... LIMIT 1, as above:
# with the owner inside, the planner walks the owner's rows instead), then
# deleted through its ``ctid``, joined in the order of ids (sorted by the
# caller) so that its row locks come in the same order as LOCK_STATES' and
# the two cannot deadlock. A row changed since this statement's snapshot is
# not deleted (its newer version no longer has that ctid), like one that does
# not match. Returns (id, lease end) per message deleted; the caller judges
# the rest with LOCK_STATES and sql_base, which then finds each as it is now.
# Payloads go by key, tombstones as for any delete.
ACK_HELD = f"""WITH held AS MATERIALIZED (
        SELECT m.tid FROM unnest(%(ids)s::text[], %(versions)s::int8[]) AS u (id, version)
        CROSS JOIN LATERAL (
            SELECT m.ctid AS tid, m.version, m.owner, m.dead FROM dejaq_messages AS m
            WHERE m.topic = %(topic)s AND m.id = u.id LIMIT 1) AS m
        WHERE m.version = u.version AND m.owner = %(owner)s AND NOT m.dead),
    gone AS (
        DELETE FROM dejaq_messages AS m USING held AS h WHERE m.ctid = h.tid
        RETURNING m.id, m.ts),
    buried AS ({_BURY.format(gone="gone", buries=_BURIES)}),
    gone_payloads AS (
        DELETE FROM dejaq_payloads WHERE ctid = ANY (ARRAY(
            SELECT p.tid FROM gone AS g CROSS JOIN LATERAL (
                SELECT p.ctid AS tid FROM dejaq_payloads AS p
                WHERE p.topic = %(topic)s AND p.id = g.id LIMIT 1) AS p)))
    SELECT id, ts FROM gone"""

# Column order of MESSAGE rows follows core.model.Message. A payload is
# fetched by a subquery per row (one key lookup): with a join the planner may
# prefer hashing the topic's payloads to the few lookups needed.
_MESSAGE_COLUMNS = """m.id, m.ts,
    (SELECT p.payload FROM dejaq_payloads AS p WHERE p.topic = m.topic AND p.id = m.id),
    m.version, m.deliveries,
    m.owner, m.bucket, m.max_deliveries, m.expires_at, m.dead, m.priority, m.key,
    (SELECT p.headers FROM dejaq_payloads AS p WHERE p.topic = m.topic AND p.id = m.id)"""
# (topic, id)
GET_MESSAGE = f"""SELECT {_MESSAGE_COLUMNS} FROM dejaq_messages AS m
    WHERE m.topic = %(topic)s AND m.id = %(id)s"""
# (topic, after_id, limit)
LIST_DEAD = f"""SELECT {_MESSAGE_COLUMNS} FROM dejaq_messages AS m
    WHERE m.topic = %(topic)s AND m.dead AND m.id > %(after_id)s
    ORDER BY m.id LIMIT %(limit)s"""
# (topic, ts, id, limit): live rows in (ts, id) order after the cursor: an
# ordered scan of dejaq_messages_time from the cursor's time, the rows of one
# time put in id order as they come (an incremental sort), stopped at the LIMIT.
BY_DUE = f"""SELECT {_MESSAGE_COLUMNS} FROM dejaq_messages AS m
    WHERE m.topic = %(topic)s AND NOT m.dead AND m.ts >= %(ts)s
        AND (m.ts, m.id) > (%(ts)s, %(id)s)
    ORDER BY m.ts, m.id LIMIT %(limit)s"""

# (priority, topic, id): a move's new priority
SET_PRIORITY = "UPDATE dejaq_messages SET priority = %s WHERE topic = %s AND id = %s"

# (topic, owner, now): the count of messages released
RELEASE_OWNER = f"""WITH released AS (
        UPDATE dejaq_messages SET ts = %(now)s, owner = NULL, version = version + 1
        WHERE topic = %(topic)s AND owner = %(owner)s AND NOT dead
        RETURNING topic, bucket, key, ts),
    lowered AS ({_LOWER.format(rows="released")})
    SELECT count(*) FROM released"""
# The live and dead rows of a topic %(topic)s (dejaq_counts) and, at %(now)s,
# the live ones due, a range count on dejaq_messages_time (as long as what is
# due), and those with a lease owner not run out, through dejaq_messages_owner
# (what consumers hold). Waiting is live less the two. Each count reads its
# rows in the order of its index: with sorts disabled (SESSION_SETUP) only
# that index qualifies, where a plan made without the topic's statistics
# would read the whole topic through dejaq_messages_bucket.
_COUNTED = """coalesce((SELECT sum(live) FROM dejaq_counts WHERE topic = {topic}), 0) AS live,
        coalesce((SELECT sum(dead) FROM dejaq_counts WHERE topic = {topic}), 0) AS dead,
        (SELECT count(*) FROM (SELECT FROM dejaq_messages
            WHERE topic = {topic} AND NOT dead AND ts <= %(now)s ORDER BY ts) AS d) AS due,
        (SELECT count(*) FROM (SELECT FROM dejaq_messages
            WHERE topic = {topic} AND owner IS NOT NULL AND NOT dead AND ts > %(now)s
            ORDER BY owner) AS o) AS leased"""
# (topic, now): whether the topic exists, then live, dead, due, leased
COUNTS = f"""SELECT EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s),
        {_COUNTED.format(topic="%(topic)s")}"""
# The rows of dejaq_counts summed up, a row per topic (none for a topic whose
# sums are 0: a deleted one). Deleting and adding them back in one statement
# keeps every sum; rows added meanwhile by other transactions are not seen
# (not committed) and stay. One folder at a time (the others skip): two
# deleting the same rows in different orders could deadlock.
FOLD_COUNTS = f"""WITH folder AS (
        SELECT pg_try_advisory_xact_lock({_LOCK_CLASS_COUNTS:d}, 0) AS got),
    gone AS (DELETE FROM dejaq_counts WHERE (SELECT got FROM folder) RETURNING topic, live, dead)
    INSERT INTO dejaq_counts (topic, live, dead)
        SELECT topic, sum(live), sum(dead) FROM gone
        GROUP BY topic HAVING sum(live) <> 0 OR sum(dead) <> 0"""
# (topic, now, step, bins): whether the topic exists (a row with a null bin),
# then waiting rows by due-time bin as (bin, count). Each bin is a range count
# on dejaq_messages_time (an index-only scan where the visibility map allows;
# no grouping of the rows), less the rows with a lease owner in it, found
# through dejaq_messages_owner (a few: what consumers hold).
FORECAST = """SELECT NULL::bigint, 0::bigint
    WHERE EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s)
    UNION ALL
    SELECT i, (
        SELECT count(*) FROM dejaq_messages
        WHERE topic = %(topic)s AND NOT dead
            AND ts >= %(now)s::bigint + i * %(step)s::bigint
            AND ts < %(now)s::bigint + (i + 1) * %(step)s::bigint
    ) - (
        SELECT count(*) FROM dejaq_messages
        WHERE topic = %(topic)s AND owner IS NOT NULL AND NOT dead
            AND ts >= %(now)s::bigint + i * %(step)s::bigint
            AND ts < %(now)s::bigint + (i + 1) * %(step)s::bigint
    ) FROM generate_series(0, %(bins)s - 1) AS i"""
# (now): every topic (from dejaq_topics, empty ones too) with its live, dead,
# due and leased counts (as COUNTS) and oldest live timestamp and, when that is
# a rank, the priority of a message there and the oldest live timestamp due by
# now that is not a rank: one statement for the gauges, whatever the topic
# count, a few index reads a topic. The last two are seeks on (topic, ts),
# made only for a topic whose oldest is a rank.
CENSUS = f"""SELECT c.name, c.buckets, c.live, c.dead, c.due, c.leased, c.oldest,
        h.priority, w.ts
    FROM (SELECT t.name, (t.settings->>'buckets')::integer AS buckets,
            {_COUNTED.format(topic="t.name")},
            (SELECT min(ts) FROM dejaq_messages WHERE topic = t.name AND NOT dead) AS oldest
        FROM dejaq_topics AS t) AS c
    LEFT JOIN LATERAL (SELECT priority FROM dejaq_messages
        WHERE c.oldest < 0 AND topic = c.name AND NOT dead AND ts = c.oldest
        LIMIT 1) AS h ON true
    LEFT JOIN LATERAL (SELECT ts FROM dejaq_messages
        WHERE c.oldest < 0 AND topic = c.name AND NOT dead AND ts BETWEEN 0 AND %(now)s
        ORDER BY ts LIMIT 1) AS w ON true"""
_REDRIVE = f"""WITH redriven AS (
        UPDATE dejaq_messages
        SET dead = false, deliveries = 0, expires_at = 0, ts = %(at)s, version = version + 1
        WHERE topic = %(topic)s AND dead{{ids}}
        RETURNING topic, bucket, key, ts),
    lowered AS ({_LOWER.format(rows="redriven")})
    SELECT count(*) FROM redriven"""
# (topic, at): the count of messages redriven
REDRIVE_ALL = _REDRIVE.format(ids="")
# (topic, at, ids)
REDRIVE_IDS = _REDRIVE.format(ids=" AND id = ANY (%(ids)s::text[])")
# (topic, now): each key's due messages (a range count on dejaq_messages_key
# per lane whose head is due: the topic's lanes, no row of a waiting
# message), then its messages held under a live lease through
# dejaq_messages_owner (what consumers hold), as (key, due, oldest, held);
# then whether the topic exists, as a row with a NULL key.
KEYS = f"""SELECT l.key, count(*), min(m.ts), 0
    FROM dejaq_lanes AS l JOIN dejaq_messages AS m
        ON m.topic = l.topic AND NOT m.dead
            AND (m.key, m.bucket, m.ts) >= (l.key, l.bucket, {_MIN_TS})
            AND (m.key, m.bucket, m.ts) <= (l.key, l.bucket, %(now)s)
    WHERE l.topic = %(topic)s AND l.head <= %(now)s
    GROUP BY l.key
    UNION ALL
    SELECT key, 0, NULL, count(*) FROM dejaq_messages
    WHERE topic = %(topic)s AND owner IS NOT NULL AND NOT dead AND ts > %(now)s AND key <> ''
    GROUP BY key
    UNION ALL
    SELECT NULL, 0, NULL, 0 WHERE EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s)"""
# (topic, died_before): the count of messages deleted
PURGE_DEAD = """WITH gone AS (
        DELETE FROM dejaq_messages WHERE topic = %(topic)s AND dead AND ts < %(died_before)s
        RETURNING id),
    gone_payloads AS (
        DELETE FROM dejaq_payloads WHERE topic = %(topic)s AND id IN (SELECT id FROM gone))
    SELECT count(*) FROM gone"""

# (topic, ids): (topic exists, tombstones forgotten); one key lookup per id
FORGET_TOMBSTONES = """WITH gone AS (
        DELETE FROM dejaq_tombstones AS g USING unnest(%(ids)s::text[]) AS u (id)
        WHERE g.topic = %(topic)s AND g.id = u.id
        RETURNING 1)
    SELECT EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s), (SELECT count(*) FROM gone)"""
# (topic, deleted_before, limit): (topic exists, tombstones forgotten), the
# oldest first through dejaq_tombstones_age, deleted by ctid
PURGE_TOMBSTONES = """WITH gone AS (
        DELETE FROM dejaq_tombstones WHERE ctid = ANY (ARRAY(
            SELECT ctid FROM dejaq_tombstones
            WHERE topic = %(topic)s AND deleted_at < %(deleted_before)s AND deleted_at >= 0
            ORDER BY deleted_at LIMIT %(limit)s))
        RETURNING 1)
    SELECT EXISTS (SELECT FROM dejaq_topics WHERE name = %(topic)s), (SELECT count(*) FROM gone)"""

# (topic, bucket, after_id, limit): one bucket's messages, live and dead, by
# id, through dejaq_messages_bucket. Its ids compare with the pattern
# operators (``~>~``, ``~<~``: byte order, the "C" collation's order) which
# the primary key cannot serve: with statistics that miss the topic, the
# planner would otherwise take the primary key's id order and filter the
# bucket, reading the whole topic's rows after the cursor for every page.
SCAN_BUCKET = f"""SELECT {_MESSAGE_COLUMNS} FROM dejaq_messages AS m
    WHERE m.topic = %(topic)s AND m.bucket = %(bucket)s AND m.id ~>~ %(after_id)s
    ORDER BY m.id USING ~<~ LIMIT %(limit)s"""
