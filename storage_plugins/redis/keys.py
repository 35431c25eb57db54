"""Every Redis key of the ``redis://`` backend, built in one place (as arq's ``constants``).

Layout. One global hash, ``dejaq:topics`` (topic name -> JSON of its settings,
creation time, *generation* — a random token per incarnation of the name — and
its number of *slots*). Everything else belongs to one (topic, slot) and starts
with ``dejaq:{<tag>}:``, whose ``{...}`` hash tag puts all keys of a slot in
one Redis Cluster hash slot, so every Lua script touches one slot only.

The tag of slot ``i`` of ``n`` is ``<topic>:<i>`` when its Redis hash slot
(CRC16 of the tag, modulo 16384) falls in the ``i``-th of ``n`` equal ranges
of the 16384 hash slots, else ``<topic>:<i>:<k>`` for the smallest ``k`` >= 1
whose hash slot does (``tag``). ``redis-cli --cluster create`` gives each of
``m`` masters one such range of ``m``, rounded the same way, so a topic whose
slot count is a multiple of ``m`` puts the same number of slots on every
master. Plain tags would not: CRC16 is affine, so ``<topic>:0`` ...
``<topic>:7`` fall in a fixed pattern, 2/2/4 on 3 masters for most names.

A topic has ``slots`` of them (the URL option ``topic_slots`` when it was
created; 1 by default), each holding a contiguous range of its buckets:
bucket ``b`` belongs to slot ``b * slots // buckets``. A slot's keys:

- ``alive``            string: the topic's generation. Written by create_topic,
                       removed by delete_topic; every script checks it first, so
                       a process with a stale topic cache never writes into a
                       deleted (or deleted and re-created) topic.
- ``tl:<bucket>``      sorted set: a bucket's live timeline, member = message id,
                       score = timestamp (leased ones at their lease expiry):
                       the messages without a key (and every message of a
                       priority topic).
- ``tl:<bucket>:<key>`` sorted set: a *lane*, the same for the messages of one
                       key in one bucket of a timeline topic (``lane``). A
                       lease pass shares its limit among keys by reading each
                       key's lanes apart (lua/lease.lua), so a key's backlog is
                       never walked to reach another key's messages. The
                       *lane id* ``<bucket>`` or ``<bucket>:<key>`` names a
                       timeline or a lane: every script below handles the two
                       alike, as "timelines".
- ``heads``            sorted set: member = the lane id of a non-empty timeline in
                       this slot, score = that timeline's earliest score. Every
                       script that changes a timeline keeps it exact, in the same
                       atomic step; a lease walks it to merge the slot's
                       timelines in time order, next_due reads its first entry.
- ``grants``           sorted set: the *grants* of the live leases, one a lease
                       expiry and owner (a lease pass makes one): member =
                       ``<expiry>:<owner>`` (``grant``), score = the expiry.
- ``granted``          hash: a grant's name -> how many live messages it
                       leases: a message whose record names an owner counts in
                       the grant of its timestamp (the lease expiry) and owner.
                       Every script that ends or moves a lease takes it off
                       its grant's count in the same step, and deletes a grant
                       whose count is 0 (so ``leased`` is a few grants' counts).
- ``grant:<name>``     list: the ids a grant leased, in the order leased (an
                       extend adds an id to its new grant). An id whose record
                       no longer names that expiry and owner is left in the
                       list: readers (release, busiest) check each record.
                       Format 4 kept a sorted set ``owned`` instead (each
                       leased id scored by its expiry: a member written at
                       lease and removed at ack), read only by ``migrate``.
- ``dead``             sorted set: dead messages scored by time of death (purge).
- ``dead-ids``         sorted set, every score 0: the same ids in byte order,
                       for ``list_dead`` paging with ZRANGE ... BYLEX.
- ``entered``          hash: bucket -> how many times messages entered the
                       bucket's timeline in this slot from outside it (insert,
                       redrive), bumped by the script that adds them. A scan
                       keeps a bucket's ids in order between its pages while
                       this count stands still (``scan``).
- ``records``          hash: message id -> its metadata record, packed in one
                       value (``record``: timestamp, version, deliveries,
                       bucket, max deliveries, expiry, dead, priority, owner),
                       the payload inline when at most ``record.INLINE_MAX``,
                       and the message's key (lane scripts read it there); or
                       a deleted id's tombstone (``graves``).
- ``payloads``         hash: message id -> a larger payload, apart from the
                       record, so no lease or move ever copies it.
- ``headers``          hash: message id -> its encoded headers (only those that
                       have some; the record's flag says so), read by get, scan
                       and lease, never rewritten.
- ``waits``            sorted set, priority topics only: member = a bucket, score =
                       a lower bound of the earliest timestamp >= 0 on its
                       timeline (not ranked yet: ranks are negative). Every
                       script that writes such a timestamp lowers it; promote,
                       which reads it to find what became available, sets it
                       exact for the timelines it read. The census reads it to
                       find the oldest due message not ranked yet.
- ``graves``           list: the tombstones of deleted messages (acked,
                       cancelled, delivered at most once) in the order they were
                       written, each the time of deletion (a little-endian
                       double) then the id. The tombstone itself is the id's
                       field of ``records``, holding that time alone (8 bytes,
                       where a record holds ``record.SIZE`` or more): the HMGET
                       that insert makes for duplicates finds it, with no index
                       to look up or write a message. Written, with the topic's
                       dedup window, by the script that deletes; forgotten from
                       the old end (``lua/purge_tombs.lua``), an entry whose
                       field no longer holds its time skipped. Formats 1 to 3
                       kept a sorted set ``tombs`` instead (id scored by that
                       time), read only by ``migrate``.

The *home* of a message is the slot of ``bucket_of(id, buckets)`` (crc32, as
the broker computes buckets): storage finds a message from its id alone. The
broker always produces ``bucket == bucket_of(id)``, so a message's timeline is
in its home slot. A caller may pass another bucket (the conformance suite does);
when that bucket belongs to another slot, such a *stray* still lives in its
home slot, on ``tl:<bucket>`` there (listed in that slot's ``heads``), and
``stray-homes`` (in the bucket's own slot: other slots holding timelines of
this slot's buckets) makes it findable for lease and next_due. With one slot
there are no strays.

Lua scripts receive a slot's fixed keys in KEYS and build the per-timeline keys
and the two message hashes from the slot prefix and the suffixes below
(``RECORDS``, ...), all under the same hash tag — the form Redis Cluster accepts.

A message costs no key of its own: its record (and a small payload with it) is
a field of the slot's ``records`` hash, so a script reads or writes a whole
batch of them in one ``HMGET`` / ``HSET`` / ``HDEL`` instead of commands (and
two keys created and deleted) per message. Version 1 of the layout (``FORMAT_VERSION``) kept a hash
``m:<id>`` and a string ``p:<id>`` per message, under the plain tag
``<topic>:<index>`` (``Slot.format1``); ``migrate`` upgrades it. Version 2 had
no keys, lanes or headers: its records and timelines read as version 3's
without a key, so its upgrade only sets the version; a broker of version 2
would misread a keyed record, hence the new number. Version 4 keeps the
tombstones as fields of ``records`` and the list ``graves`` instead of the
sorted set ``tombs``; ``migrate`` moves them. Version 5 keeps the leases as
grants (``grants``, ``granted``, ``grant:<name>``) instead of the sorted set
``owned``; ``migrate`` moves them.
"""

from __future__ import annotations

from binascii import crc_hqx
from dataclasses import dataclass
from functools import lru_cache

NAMESPACE = "dejaq"
TOPICS = f"{NAMESPACE}:topics"
# string: a random id set once, when the first broker asks (the storage's identity)
IDENTITY = f"{NAMESPACE}:identity"
# string: the version of this layout, set by the first broker that opens the
# store; a broker refuses a store of another version (``FORMAT_VERSION``)
FORMAT = f"{NAMESPACE}:format"
FORMAT_VERSION = 5

# Suffixes after a slot prefix. The Lua scripts get them from here too.
ALIVE = "alive"
TIMELINE = "tl:"
HEADS = "heads"
GRANTS = "grants"
GRANTED = "granted"
GRANT = "grant:"
# Formats 1 to 4's leased ids, read only by ``migrate``.
OWNED = "owned"
DEAD = "dead"
DEAD_IDS = "dead-ids"
STRAY_HOMES = "stray-homes"
ENTERED = "entered"
RECORDS = "records"
PAYLOADS = "payloads"
HEADERS = "headers"
# Version 1's per-message keys, read only by ``migrate``.
V1_RECORD = "m:"
V1_PAYLOAD = "p:"
# Formats 1 to 3's tombstones, read only by ``migrate``.
TOMBS = "tombs"
GRAVES = "graves"
WAITS = "waits"


def lane(bucket: int, key: str = "") -> str:
    """The lane id of a bucket's messages of ``key`` ("": the bucket's timeline)."""
    return f"{bucket}:{key}" if key else str(bucket)


def lane_bucket(lane_id: str | bytes) -> int:
    """The bucket of a lane id."""
    text = lane_id.decode() if isinstance(lane_id, bytes) else lane_id
    return int(text.partition(":")[0])


HASH_SLOTS = 16384  # Redis Cluster's
# How far ``tag`` looks for a suffix, in multiples of the slot count: a name
# whose tag Redis cuts short (a '}' in it) hashes the same whatever the suffix.
_TRIES = 64


def hash_slot(key: str) -> int:
    """The Redis Cluster hash slot of ``key`` (CRC16 of its hash tag, as Redis
    reads it: the text between the first '{' and the next '}', if not empty)."""
    raw = key.encode()
    start = raw.find(b"{")
    if start >= 0:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return crc_hqx(raw, 0) % HASH_SLOTS


def hash_range(index: int, slots: int) -> tuple[int, int]:
    """The ``index``-th of ``slots`` equal ranges of the hash slots, [lo, hi),
    bounds rounded to nearest as ``redis-cli --cluster create`` rounds its
    masters' ranges."""

    def bound(i: int) -> int:
        return (2 * i * HASH_SLOTS + slots) // (2 * slots)

    return bound(index), bound(index + 1)


@lru_cache(maxsize=4096)
def tags(topic: str, slots: int) -> tuple[str, ...]:
    """The hash tag of each of a topic's ``slots`` slots (the module's docstring)."""
    out = []
    for index in range(slots):
        lo, hi = hash_range(index, slots)
        found = f"{topic}:{index}"
        for k in range(1, _TRIES * slots):
            if lo <= hash_slot("{" + found + "}") < hi:
                break
            found = f"{topic}:{index}:{k}"
        else:
            found = f"{topic}:{index}"  # no suffix moves it: keep the plain tag
        out.append(found)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Slot:
    """The keys of one (topic, slot): slot ``index`` of the topic's ``slots``.
    ``prefix`` is derived unless given (``format1``)."""

    topic: str
    index: int
    slots: int
    prefix: str = ""

    def __post_init__(self) -> None:
        if not self.prefix:
            tag = tags(self.topic, self.slots)[self.index]
            object.__setattr__(self, "prefix", f"{NAMESPACE}:{{{tag}}}:")

    @classmethod
    def format1(cls, topic: str, index: int, slots: int) -> Slot:
        """The slot as version 1 of the layout named it, tagged ``<topic>:<index>``
        (read only by ``migrate``)."""
        return cls(topic, index, slots, f"{NAMESPACE}:{{{topic}:{index}}}:")

    @property
    def alive(self) -> str:
        return self.prefix + ALIVE

    def timeline(self, bucket: int | str | bytes) -> str:
        """The timeline of ``bucket`` (or of a lane id, ``lane``) stored in this slot."""
        if isinstance(bucket, bytes):
            bucket = bucket.decode()
        return f"{self.prefix}{TIMELINE}{bucket}"

    @property
    def heads(self) -> str:
        return self.prefix + HEADS

    @property
    def grants(self) -> str:
        return self.prefix + GRANTS

    @property
    def granted(self) -> str:
        return self.prefix + GRANTED

    def grant(self, name: str) -> str:
        """The list of the ids leased by grant ``name`` (``<expiry>:<owner>``)."""
        return self.prefix + GRANT + name

    @property
    def owned(self) -> str:
        return self.prefix + OWNED

    @property
    def dead(self) -> str:
        return self.prefix + DEAD

    @property
    def dead_ids(self) -> str:
        return self.prefix + DEAD_IDS

    @property
    def stray_homes(self) -> str:
        return self.prefix + STRAY_HOMES

    @property
    def entered(self) -> str:
        return self.prefix + ENTERED

    @property
    def tombs(self) -> str:
        return self.prefix + TOMBS

    @property
    def graves(self) -> str:
        return self.prefix + GRAVES

    @property
    def waits(self) -> str:
        return self.prefix + WAITS

    @property
    def records(self) -> str:
        return self.prefix + RECORDS

    @property
    def payloads(self) -> str:
        return self.prefix + PAYLOADS

    @property
    def headers(self) -> str:
        return self.prefix + HEADERS

    def v1_record(self, id: str) -> str:
        return self.prefix + V1_RECORD + id

    def v1_payload(self, id: str) -> str:
        return self.prefix + V1_PAYLOAD + id
