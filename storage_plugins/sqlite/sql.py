"""Every SQL statement of the ``sqlite://`` backend, in one place.

Tables: ``topics`` (name, settings as JSON), ``messages`` (the metadata
timeline, one small row per message) and ``payloads`` (the bytes, apart, so a
mutation never rewrites a payload). A bucket set travels as one JSON array
parameter (``json_each``), so each statement's text is constant and cached.

Index choice, measured with ``EXPLAIN QUERY PLAN`` and timings on 400k
messages: ``(topic, dead, bucket, ts)`` seeks each asked bucket and stops
after ``LIMIT`` rows per bucket (0.05-0.14 ms a lease for 1-64 buckets;
6 ms for all of 4,096 buckets), whatever the data. ``(topic, dead, ts)``
is as fast while the asked buckets hold the earliest messages, but scans every
due row (17 ms) — and ``next_due`` the whole topic (28 ms) — when the asked
buckets are empty. Bounded beats lucky, so "all buckets" is sent as the
explicit list ``0..buckets-1`` rather than as no filter.

Without ``ANALYZE`` statistics the planner prefers the primary key for the due
and release-by-owner lookups (21 ms and 17 ms on 200k rows, against 0.4 ms
and 0.01 ms through the index), so those statements pin their index with
``INDEXED BY``; tests/storage_plugins/test_sqlite.py checks the plans.
"""

from __future__ import annotations

from dejaq.core.model import DEFAULT_DEDUP_WINDOW_MS

# PRAGMA user_version: bump with a migration step in sqlite.py. 2: tombstones
# (created by SCHEMA's IF NOT EXISTS in a version 1 file). 3: messages.priority
# (added to an older file by ADD_PRIORITY). 4: topic_counts (filled from the
# messages of an older file by FILL_COUNTS). 5: doomed_topics (created by
# SCHEMA's IF NOT EXISTS; an older dejaq would not remove a doomed topic's rows).
# 6: messages.key, payloads.headers (added to an older file by ADD_KEY and
# ADD_HEADERS), lanes and messages_key (created by SCHEMA after them).
SCHEMA_VERSION = 6

JOURNAL_WAL = "PRAGMA journal_mode = WAL"
# The checkpointer's own connection checkpoints (checkpoint.py); the writer's
# only past 64k pages (256 MiB at 4 KiB), when it never pauses long enough.
AUTOCHECKPOINT = "PRAGMA wal_autocheckpoint = 65536"
# A WAL grown by a burst is cut back to this size when it restarts.
JOURNAL_SIZE_LIMIT = f"PRAGMA journal_size_limit = {64 << 20:d}"
# -> (busy, WAL frames, frames checkpointed)
CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"
SYNCHRONOUS = {"normal": "PRAGMA synchronous = NORMAL", "full": "PRAGMA synchronous = FULL"}
GET_USER_VERSION = "PRAGMA user_version"
SET_USER_VERSION = f"PRAGMA user_version = {SCHEMA_VERSION:d}"

BEGIN = "BEGIN IMMEDIATE"  # take the write lock up front: no upgrade deadlock between processes
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
SAVEPOINT = "SAVEPOINT job"
RELEASE = "RELEASE job"
ROLLBACK_TO = "ROLLBACK TO job"
PING = "SELECT 1"

SCHEMA = (
    # Facts about the database itself: its ``identity``, made at creation.
    """CREATE TABLE IF NOT EXISTS meta (
        key TEXT NOT NULL PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS topics (
        name TEXT NOT NULL PRIMARY KEY,
        settings TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS messages (
        topic TEXT NOT NULL,
        id TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        ts INTEGER NOT NULL,
        version INTEGER NOT NULL,
        deliveries INTEGER NOT NULL,
        owner TEXT,
        max_deliveries INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        dead INTEGER NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        key TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (topic, id)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS messages_due ON messages (topic, dead, bucket, ts)",
    "CREATE INDEX IF NOT EXISTS messages_dead ON messages (topic, id) WHERE dead = 1",
    "CREATE INDEX IF NOT EXISTS messages_owner ON messages (topic, owner) WHERE owner IS NOT NULL",
    # Scans (SCAN_BUCKET): a WITHOUT ROWID index ends with the primary key, so
    # this is (topic, bucket, id). Written on insert and delete only: nothing
    # changes a message's bucket. Made on open in a file from before it.
    "CREATE INDEX IF NOT EXISTS messages_bucket ON messages (topic, bucket)",
    # Payloads may be large: a rowid table keeps them out of the key b-tree.
    """CREATE TABLE IF NOT EXISTS payloads (
        topic TEXT NOT NULL,
        id TEXT NOT NULL,
        payload BLOB NOT NULL,
        headers BLOB NOT NULL DEFAULT x'',
        PRIMARY KEY (topic, id)
    )""",
    # The ids of deleted messages, kept for the topic's dedup window (no payload).
    """CREATE TABLE IF NOT EXISTS tombstones (
        topic TEXT NOT NULL,
        id TEXT NOT NULL,
        deleted_at INTEGER NOT NULL,
        PRIMARY KEY (topic, id)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS tombstones_age ON tombstones (topic, deleted_at)",
    # Live and dead messages counted per topic (ADD_COUNTS, in the transaction
    # of every write that changes them): the counts by state read these two
    # numbers and range counts of what is due or leased now, never every
    # message of the topic.
    """CREATE TABLE IF NOT EXISTS topic_counts (
        topic TEXT NOT NULL PRIMARY KEY,
        live INTEGER NOT NULL,
        dead INTEGER NOT NULL
    ) WITHOUT ROWID""",
    # Deleted topics whose rows are still being removed, a chunk a transaction
    # (ops.purge_chunk): the topic row goes at once, its messages after.
    """CREATE TABLE IF NOT EXISTS doomed_topics (
        name TEXT NOT NULL PRIMARY KEY
    ) WITHOUT ROWID""",
    # Keys (fair lease passes, ops.lease_fairly). A lane is one key's live
    # messages in one bucket; its head is at or before the earliest of them:
    # early, never late. Every write that puts a keyed message at a time lowers
    # its lane's head to it (UPSERT_LANE, LOWER_LANES); a pass that took from
    # a lane sets its head again (FIX_LANE), or drops it when it is empty.
    """CREATE TABLE IF NOT EXISTS lanes (
        topic TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        key TEXT NOT NULL,
        head INTEGER NOT NULL,
        PRIMARY KEY (topic, bucket, key)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS lanes_due ON lanes (topic, bucket, head)",
)
# After SCHEMA and the columns an older file lacks: each key's live messages
# by bucket and time (the unkeyed ones under ""), so that a fair pass takes a
# key's earliest messages with a seek per bucket, never reading past another
# key's backlog.
KEY_INDEXES = (
    "CREATE INDEX IF NOT EXISTS messages_key ON messages (topic, key, bucket, ts) WHERE dead = 0",
)

# Upgrading a file made before priority topics (schema version < 3): its
# messages are a timeline's, priority 0.
MESSAGE_COLUMNS = "SELECT name FROM pragma_table_info('messages')"
ADD_PRIORITY = "ALTER TABLE messages ADD COLUMN priority INTEGER NOT NULL DEFAULT 0"
# A file made before keys (schema version < 6): no message has a key or headers.
ADD_KEY = "ALTER TABLE messages ADD COLUMN key TEXT NOT NULL DEFAULT ''"
PAYLOAD_COLUMNS = "SELECT name FROM pragma_table_info('payloads')"
ADD_HEADERS = "ALTER TABLE payloads ADD COLUMN headers BLOB NOT NULL DEFAULT x''"

# (topic, live, dead): what a write changed, added to the topic's counts (a
# row made when missing). Once a statement, not once a row: a row trigger
# cost 1-2 us an insert and 4-6 us a delete (measured), this one call.
ADD_COUNTS = """INSERT INTO topic_counts (topic, live, dead) VALUES (?, ?, ?)
    ON CONFLICT (topic) DO UPDATE SET live = live + excluded.live, dead = dead + excluded.dead"""
# A file from before topic_counts (schema version < 4): count what it holds.
FILL_COUNTS = """INSERT OR REPLACE INTO topic_counts (topic, live, dead)
    SELECT topic, sum(dead = 0), sum(dead = 1) FROM messages GROUP BY topic"""

# (a random id): kept when the database already has one
INSERT_IDENTITY = "INSERT INTO meta (key, value) VALUES ('identity', ?) ON CONFLICT DO NOTHING"
GET_IDENTITY = "SELECT value FROM meta WHERE key = 'identity'"

# -- topics -------------------------------------------------------------------

INSERT_TOPIC = """INSERT INTO topics (name, settings, created_at_ms) VALUES (?, ?, ?)
    ON CONFLICT (name) DO NOTHING"""
UPDATE_TOPIC = "UPDATE topics SET settings = ? WHERE name = ? AND created_at_ms = ?"
GET_TOPIC = "SELECT name, settings, created_at_ms FROM topics WHERE name = ?"
LIST_TOPICS = "SELECT name, settings, created_at_ms FROM topics ORDER BY name"
TOPIC_BUCKETS = "SELECT json_extract(settings, '$.buckets') FROM topics WHERE name = ?"
# (name): bucket count and kind (a topic stored before kinds existed is a timeline)
TOPIC_SHAPE = """SELECT json_extract(settings, '$.buckets'), json_extract(settings, '$.kind')
    FROM topics WHERE name = ?"""
DELETE_TOPIC = "DELETE FROM topics WHERE name = ?"
DELETE_TOPIC_COUNTS = "DELETE FROM topic_counts WHERE topic = ?"
# A deleted topic's rows go a chunk at a time (ops.purge_chunk), so one large
# topic never holds the write lock for long. (name)
DOOM_TOPIC = "INSERT OR IGNORE INTO doomed_topics (name) VALUES (?)"
SPARE_TOPIC = "DELETE FROM doomed_topics WHERE name = ?"
DOOMED_TOPICS = "SELECT name FROM doomed_topics ORDER BY name"
IS_DOOMED = "SELECT 1 FROM doomed_topics WHERE name = ?"
# (name, limit): up to ``limit`` of the topic's rows, each a seek on its
# primary key that stops at the limit.
PURGE_MESSAGES = """DELETE FROM messages WHERE topic = ?1 AND id IN (
    SELECT id FROM messages WHERE topic = ?1 LIMIT ?2)"""
PURGE_PAYLOADS = """DELETE FROM payloads WHERE rowid IN (
    SELECT rowid FROM payloads WHERE topic = ?1 LIMIT ?2)"""
PURGE_TOPIC_TOMBSTONES = """DELETE FROM tombstones WHERE topic = ?1 AND id IN (
    SELECT id FROM tombstones WHERE topic = ?1 LIMIT ?2)"""
PURGE_LANES = """DELETE FROM lanes WHERE (topic, bucket, key) IN (
    SELECT topic, bucket, key FROM lanes WHERE topic = ?1 LIMIT ?2)"""
# (topic): the dedup window (a topic stored before it existed has the default)
TOPIC_DEDUP_WINDOW = f"""SELECT coalesce(json_extract(settings, '$.dedup_window_ms'),
    {DEFAULT_DEDUP_WINDOW_MS:d}) FROM topics WHERE name = ?"""

# -- messages -----------------------------------------------------------------

# (topic, ids JSON): the ids taken, by a message or by a tombstone
EXISTING_IDS = """SELECT id FROM messages
    WHERE topic = ?1 AND id IN (SELECT value FROM json_each(?2))
    UNION ALL
    SELECT id FROM tombstones WHERE topic = ?1 AND id IN (SELECT value FROM json_each(?2))"""
# (topic, ids JSON): the ids that have a tombstone
TOMBSTONED_IDS = """SELECT id FROM tombstones
    WHERE topic = ?1 AND id IN (SELECT value FROM json_each(?2))"""
# A waiting message replaced (Storage.insert with REPLACE): every field the
# producer gives, the lease owner cleared, deliveries kept, version moved on.
# (bucket, ts, max_deliveries, expires_at, priority, key, topic, id)
REPLACE_MESSAGE = """UPDATE messages SET bucket = ?, ts = ?, version = version + 1, owner = NULL,
    max_deliveries = ?, expires_at = ?, priority = ?, key = ? WHERE topic = ? AND id = ?"""
# (payload, headers, topic, id)
REPLACE_PAYLOAD = "UPDATE payloads SET payload = ?, headers = ? WHERE topic = ? AND id = ?"
# A waiting message moved (EXTEND): (ts, topic, id)
EXTEND_MESSAGE = """UPDATE messages SET ts = ?, version = version + 1, owner = NULL
    WHERE topic = ? AND id = ?"""
INSERT_MESSAGE = """INSERT INTO messages
    (topic, id, bucket, ts, version, deliveries, owner, max_deliveries, expires_at, dead, priority,
     key)
    VALUES (?, ?, ?, ?, 1, 0, NULL, ?, ?, 0, ?, ?)"""
INSERT_PAYLOAD = "INSERT INTO payloads (topic, id, payload, headers) VALUES (?, ?, ?, ?)"
SET_PAYLOAD = "UPDATE payloads SET payload = ? WHERE topic = ? AND id = ?"
# A set of ids travels as one JSON array parameter: ``_IDS`` is its rows.
_IDS = "(SELECT value FROM json_each(?))"
# (topic, ids JSON)
DELETE_MESSAGES = f"DELETE FROM messages WHERE topic = ? AND id IN {_IDS}"
DELETE_PAYLOADS = f"DELETE FROM payloads WHERE topic = ? AND id IN {_IDS}"
# (topic, deleted_at, ids JSON)
BURY = """INSERT OR REPLACE INTO tombstones (topic, id, deleted_at)
    SELECT ?, value, ? FROM json_each(?)"""
# (topic, ids JSON)
FORGET_TOMBSTONES = f"DELETE FROM tombstones WHERE topic = ? AND id IN {_IDS}"
# (topic, deleted_before, limit): the oldest first, through tombstones_age
PURGE_TOMBSTONES = """DELETE FROM tombstones WHERE topic = ?1 AND id IN (
    SELECT id FROM tombstones WHERE topic = ?1 AND deleted_at < ?2
    ORDER BY deleted_at LIMIT ?3)"""

# (topic, now, buckets JSON, limit, topic): the earliest due rows with their
# payloads. The payloads are joined to the ``LIMIT``-ed rows only (a subquery
# with a LIMIT is not flattened into a join), never to every due row.
DUE = """SELECT d.id, d.ts, d.version, d.deliveries, d.max_deliveries, d.expires_at, d.priority,
        d.key, p.payload, p.headers
    FROM (
        SELECT id, ts, version, deliveries, max_deliveries, expires_at, priority, key
        FROM messages INDEXED BY messages_due
        WHERE topic = ? AND dead = 0 AND ts <= ? AND bucket IN (SELECT value FROM json_each(?))
        ORDER BY ts LIMIT ?) AS d
    JOIN payloads AS p ON p.topic = ? AND p.id = d.id"""
# (topic, key, bound, buckets JSON, limit): as DUE, one key's earliest due
# rows (a seek per bucket on messages_key that stops at the LIMIT).
KEY_DUE = """SELECT d.id, d.ts, d.version, d.deliveries, d.max_deliveries, d.expires_at, d.priority,
        d.key, p.payload, p.headers
    FROM (
        SELECT id, ts, version, deliveries, max_deliveries, expires_at, priority, key
        FROM messages INDEXED BY messages_key
        WHERE topic = ?1 AND key = ?2 AND dead = 0 AND ts <= ?3
            AND bucket IN (SELECT value FROM json_each(?4))
        ORDER BY ts LIMIT ?5) AS d
    JOIN payloads AS p ON p.topic = ?1 AND p.id = d.id"""
# (topic, key, bound, buckets JSON): a key's earliest due timestamp (the
# unkeyed messages', which have no lane)
KEY_HEAD = """SELECT ts FROM messages INDEXED BY messages_key
    WHERE topic = ?1 AND key = ?2 AND dead = 0 AND ts <= ?3
        AND bucket IN (SELECT value FROM json_each(?4))
    ORDER BY ts LIMIT 1"""
# (topic, buckets JSON, bound): the lanes of the buckets whose head is due, a
# seek per bucket on lanes_due. None in a topic without keys: its passes are
# DUE's, as before keys.
DUE_LANES = """SELECT key, bucket, head FROM lanes INDEXED BY lanes_due
    WHERE topic = ?1 AND bucket IN (SELECT value FROM json_each(?2)) AND head <= ?3"""
# (topic, bucket, key, head): a keyed message stored at ``head``
UPSERT_LANE = """INSERT INTO lanes (topic, bucket, key, head) VALUES (?, ?, ?, ?)
    ON CONFLICT (topic, bucket, key) DO UPDATE SET head = min(head, excluded.head)"""
# (topic, ids JSON): after a write that may have put live keyed messages
# earlier (nack, hand back, move, redrive), their lanes' heads lowered to them
LOWER_LANES = f"""INSERT INTO lanes (topic, bucket, key, head)
    SELECT topic, bucket, key, min(ts) FROM messages
    WHERE topic = ? AND id IN {_IDS} AND key <> '' AND dead = 0
    GROUP BY bucket, key
    ON CONFLICT (topic, bucket, key) DO UPDATE SET head = min(head, excluded.head)"""
# (topic, bucket, key): a lane a pass took from, its head set to its earliest
# live message, or to EMPTY when it has none; then (topic, buckets JSON) the
# empty lanes of the pass's buckets dropped (a seek per bucket on lanes_due).
EMPTY = 2**63 - 1
FIX_LANE = f"""UPDATE lanes SET head = coalesce((SELECT ts FROM messages INDEXED BY messages_key
        WHERE topic = ?1 AND key = ?3 AND bucket = ?2 AND dead = 0 ORDER BY ts LIMIT 1),
        {EMPTY:d})
    WHERE topic = ?1 AND bucket = ?2 AND key = ?3"""
DROP_EMPTY_LANES = f"""DELETE FROM lanes INDEXED BY lanes_due
    WHERE topic = ?1 AND bucket IN (SELECT value FROM json_each(?2)) AND head = {EMPTY:d}"""
# Busiest keys (ops.keys): (topic, now) each key's due messages, a range count
# on messages_key per lane whose head is due (the topic's lanes, no row of a
# waiting message), and its messages held under a live lease, through
# messages_owner (what consumers hold).
KEYS_DUE = """SELECT l.key, count(*), min(m.ts)
    FROM lanes AS l CROSS JOIN messages AS m INDEXED BY messages_key
        ON m.topic = l.topic AND m.key = l.key AND m.bucket = l.bucket AND m.dead = 0
            AND m.ts <= ?2
    WHERE l.topic = ?1 AND l.head <= ?2
    GROUP BY l.key"""
KEYS_HELD = """SELECT key, count(*) FROM messages INDEXED BY messages_owner
    WHERE topic = ?1 AND owner IS NOT NULL AND dead = 0 AND ts > ?2 AND key <> ''
    GROUP BY key"""
# (topic, buckets JSON)
NEXT_DUE = """SELECT ts FROM messages INDEXED BY messages_due
    WHERE topic = ? AND dead = 0 AND bucket IN (SELECT value FROM json_each(?))
    ORDER BY ts LIMIT 1"""

# Priority topics (core/priority.py). (:topic, :now, :buckets JSON, :limit,
# :step, :created_at, :base): the oldest live rows of the buckets that became
# available by now (0 <= ts <= now: a not-before time or nack delay come, a
# lease run out) move to their rank in one statement, unowned, versions
# bumped. The rank is core.priority.rank spelled in SQL (the right-hand side
# reads the row as it was); the conformance suite pins the two together.
PROMOTE = """UPDATE messages
    SET ts = priority * :step + (ts - :created_at) - :base, owner = NULL, version = version + 1
    WHERE topic = :topic AND id IN (
        SELECT id FROM messages INDEXED BY messages_due
        WHERE topic = :topic AND dead = 0 AND ts >= 0 AND ts <= :now
            AND bucket IN (SELECT value FROM json_each(:buckets))
        ORDER BY ts LIMIT :limit)"""
# (priority, topic, id): a move's new priority
SET_PRIORITY = "UPDATE messages SET priority = ? WHERE topic = ? AND id = ?"

# (topic, owner, now): the lanes of the messages ``owner`` holds, lowered to
# ``now`` before a release makes them due then
LOWER_OWNER_LANES = """INSERT INTO lanes (topic, bucket, key, head)
    SELECT topic, bucket, key, ?3 FROM messages INDEXED BY messages_owner
    WHERE topic = ?1 AND owner = ?2 AND dead = 0 AND key <> ''
    GROUP BY bucket, key
    ON CONFLICT (topic, bucket, key) DO UPDATE SET head = min(head, excluded.head)"""
# (topic, at): the lanes of the dead messages a redrive of all puts back at ``at``
LOWER_DEAD_LANES = """INSERT INTO lanes (topic, bucket, key, head)
    SELECT topic, bucket, key, ?2 FROM messages INDEXED BY messages_dead
    WHERE topic = ?1 AND dead = 1 AND key <> ''
    GROUP BY bucket, key
    ON CONFLICT (topic, bucket, key) DO UPDATE SET head = min(head, excluded.head)"""

# (topic, ids JSON): column order of sql_base.RowState, after the id.
STATES = f"""SELECT id, ts, version, deliveries, owner, max_deliveries, dead FROM messages
    WHERE topic = ? AND id IN {_IDS}"""
# Column order of MESSAGE rows follows core.model.Message.
_MESSAGE_COLUMNS = """m.id, m.ts, p.payload, m.version, m.deliveries, m.owner, m.bucket,
    m.max_deliveries, m.expires_at, m.dead, m.priority, m.key, p.headers"""
_WITH_PAYLOAD = "JOIN payloads AS p ON p.topic = m.topic AND p.id = m.id"
GET_MESSAGE = f"""SELECT {_MESSAGE_COLUMNS} FROM messages AS m {_WITH_PAYLOAD}
    WHERE m.topic = ? AND m.id = ?"""
# (topic, after_id, limit)
LIST_DEAD = f"""SELECT {_MESSAGE_COLUMNS}
    FROM messages AS m INDEXED BY messages_dead {_WITH_PAYLOAD}
    WHERE m.topic = ? AND m.dead = 1 AND m.id > ? ORDER BY m.id LIMIT ?"""

# (topic, buckets JSON, after ts, after id, limit): live rows in (ts, id)
# order after the cursor, with their payloads. messages_due ends with the
# primary key, so it is (topic, dead, bucket, ts, id): a seek per bucket to
# the cursor that stops after the LIMIT, the payloads joined to the page only.
BY_DUE = f"""SELECT {_MESSAGE_COLUMNS} FROM (
        SELECT id, ts FROM messages INDEXED BY messages_due
        WHERE topic = ?1 AND dead = 0 AND bucket IN (SELECT value FROM json_each(?2))
            AND (ts, id) > (?3, ?4)
        ORDER BY ts, id LIMIT ?5) AS d
    CROSS JOIN messages AS m ON m.topic = ?1 AND m.id = d.id
    CROSS JOIN payloads AS p ON p.topic = m.topic AND p.id = m.id
    ORDER BY d.ts, d.id"""

# Row updates run one row per execution (``executemany``: one prepared
# statement, looped in C): SQLite updates a row found by its full key in one
# pass, while one UPDATE of many keys (``id IN json_each``) first collects
# them — measured 0.4-0.6 ms against 1.1-1.6 ms for 100 leases. Reads and
# deletes of a set are one statement.
# (until, owner, topic, id)
TAKE = """UPDATE messages SET ts = ?, owner = ?, deliveries = deliveries + 1,
    version = version + 1 WHERE topic = ? AND id = ?"""
# (died_at, topic, id)
KILL = """UPDATE messages SET dead = 1, owner = NULL, ts = ?, version = version + 1
    WHERE topic = ? AND id = ?"""
# (ts, version, owner, dead, topic, id): a state planned by sql_base (settle, move)
SET_STATE = """UPDATE messages SET ts = ?, version = ?, deliveries = ?, owner = ?, dead = ?
    WHERE topic = ? AND id = ?"""
# (now, topic, owner)
RELEASE_OWNER = """UPDATE messages INDEXED BY messages_owner
    SET ts = ?, owner = NULL, version = version + 1
    WHERE topic = ? AND owner = ? AND dead = 0"""
# Counts by state: (topic) the topic's live and dead messages (topic_counts);
# (topic, now, buckets JSON) the live ones due by now, a range count on
# messages_due (one seek per bucket, no table row read: as long as what is
# due); (topic, now) those with a lease owner not run out yet, through
# messages_owner (what consumers hold). Waiting is live less the two.
LIVE_DEAD = "SELECT live, dead FROM topic_counts WHERE topic = ?"
DUE_COUNT = """SELECT count(*) FROM messages INDEXED BY messages_due
    WHERE topic = ?1 AND dead = 0 AND bucket IN (SELECT value FROM json_each(?3)) AND ts <= ?2"""
LEASED_COUNT = """SELECT count(*) FROM messages INDEXED BY messages_owner
    WHERE topic = ?1 AND owner IS NOT NULL AND dead = 0 AND ts > ?2"""
# (now, step, topic, buckets JSON, bins): waiting rows by due-time bin, as
# (bin, count). Each bin is a range count on messages_due (one seek per
# bucket, no table row read, no grouping of the rows), less the rows with a
# lease owner in it, found through messages_owner (a few: what consumers hold).
FORECAST = """WITH RECURSIVE bins(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM bins WHERE i + 1 < ?5)
    SELECT i, (
        SELECT count(*) FROM messages INDEXED BY messages_due
        WHERE topic = ?3 AND dead = 0 AND bucket IN (SELECT value FROM json_each(?4))
            AND ts >= ?1 + i * ?2 AND ts < ?1 + (i + 1) * ?2
    ) - (
        SELECT count(*) FROM messages INDEXED BY messages_owner
        WHERE topic = ?3 AND owner IS NOT NULL AND dead = 0
            AND ts >= ?1 + i * ?2 AND ts < ?1 + (i + 1) * ?2
    ) FROM bins"""
# The census (census.py), on its read-only connection: every topic with its
# bucket count and live and dead counts; then, topic by topic, the counts of
# what is due and leased (above) and (topic, buckets JSON) its oldest live
# timestamp with the priority of a message there, and the oldest that is not
# a rank (>= 0): each an ordered seek per bucket that stops at its first row.
BEGIN_READ = "BEGIN DEFERRED"
TOPIC_NAMES = """SELECT t.name, json_extract(t.settings, '$.buckets'),
        coalesce(c.live, 0), coalesce(c.dead, 0)
    FROM topics AS t LEFT JOIN topic_counts AS c ON c.topic = t.name"""
_OLDEST = """SELECT ts, priority FROM messages INDEXED BY messages_due
    WHERE topic = ?1 AND dead = 0 AND bucket IN (SELECT value FROM json_each(?2)){}
    ORDER BY ts LIMIT 1"""
OLDEST = _OLDEST.format("")
OLDEST_UNRANKED = _OLDEST.format(" AND ts >= 0")
# (at, topic)
REDRIVE_ALL = """UPDATE messages SET dead = 0, deliveries = 0, expires_at = 0, ts = ?,
    version = version + 1
    WHERE topic = ? AND dead = 1"""
# (at, topic, ids JSON)
REDRIVE_IDS = REDRIVE_ALL + f" AND id IN {_IDS}"
# (topic, died_before)
PURGE_DEAD_PAYLOADS = """DELETE FROM payloads WHERE topic = ?1 AND id IN
    (SELECT id FROM messages WHERE topic = ?1 AND dead = 1 AND ts < ?2)"""
PURGE_DEAD_MESSAGES = "DELETE FROM messages WHERE topic = ? AND dead = 1 AND ts < ?"

# (topic, bucket, after_id, limit): one bucket's messages, live and dead, by
# id: a seek into messages_bucket that reads the page's rows and stops, each
# row's payload found by key. Pinned, as a planner left alone may put payloads
# first and walk every payload of the topic after the cursor for every page
# (2 s a page of 300 at 20k messages; with this plan 0.5 s for all 20k).
# ``CROSS JOIN`` keeps messages in the outer loop.
SCAN_BUCKET = f"""SELECT {_MESSAGE_COLUMNS}
    FROM messages AS m INDEXED BY messages_bucket CROSS JOIN payloads AS p
        ON p.topic = m.topic AND p.id = m.id
    WHERE m.topic = ? AND m.bucket = ? AND m.id > ?
    ORDER BY m.id LIMIT ?"""
