"""Every Redis key of the ``redis://`` backend, built in one place (as arq's ``constants``).

Layout. One global hash, ``dejaq:topics`` (topic name -> JSON of its settings,
creation time, *generation* — a random token per incarnation of the name — and
its number of *slots*). Everything else belongs to one (topic, slot) and starts
with ``dejaq:{<topic>:<slot>}:``, whose ``{...}`` hash tag puts all keys of a
slot in one Redis Cluster hash slot, so every Lua script touches one slot only.

A topic has ``slots`` of them (the URL option ``topic_slots`` when it was
created; 1 by default), each holding a contiguous range of its buckets:
bucket ``b`` belongs to slot ``b * slots // buckets``. A slot's keys:

- ``alive``            string: the topic's generation. Written by create_topic,
                       removed by delete_topic; every script checks it first, so
                       a process with a stale topic cache never writes into a
                       deleted (or deleted and re-created) topic.
- ``tl:<bucket>``      sorted set: a bucket's live timeline, member = message id,
                       score = timestamp (leased ones at their lease expiry).
- ``heads``            sorted set: member = a bucket with a non-empty timeline in
                       this slot, score = that timeline's earliest score. Every
                       script that changes a timeline keeps it exact, in the same
                       atomic step; a lease walks it to merge the slot's
                       timelines in time order, next_due reads its first entry.
- ``owned``            sorted set: the live messages that have a lease owner,
                       score = timestamp (so ``leased`` is one ZCOUNT).
- ``dead``             sorted set: dead messages scored by time of death (purge).
- ``dead-ids``         sorted set, every score 0: the same ids in byte order,
                       for ``list_dead`` paging with ZRANGE ... BYLEX.
- ``entered``          hash: bucket -> how many times messages entered the
                       bucket's timeline in this slot from outside it (insert,
                       redrive), bumped by the script that adds them. A scan
                       keeps a bucket's ids in order between its pages while
                       this count stands still (``scan``).
- ``m:<id>``           hash: the message's metadata record (ts, v, n, o, b, md,
                       ex, dead — see ``scripts``).
- ``p:<id>``           string: the payload, apart from the record, so no
                       mutation ever rewrites it.
- ``waits``            sorted set, priority topics only: member = a bucket, score =
                       a lower bound of the earliest timestamp >= 0 on its
                       timeline (not ranked yet: ranks are negative). Every
                       script that writes such a timestamp lowers it; promote,
                       which reads it to find what became available, sets it
                       exact for the timelines it read. The census reads it to
                       find the oldest due message not ranked yet.
- ``tombs``            sorted set: the tombstones of deleted messages (acked,
                       cancelled, delivered at most once), member = id, score =
                       when it was deleted; written, with the topic's dedup
                       window, by the script that deletes, and read by insert.

The *home* of a message is the slot of ``bucket_of(id, buckets)`` (crc32, as
the broker computes buckets): storage finds a message from its id alone. The
broker always produces ``bucket == bucket_of(id)``, so a message's timeline is
in its home slot. A caller may pass another bucket (the conformance suite does);
when that bucket belongs to another slot, such a *stray* still lives in its
home slot, on ``tl:<bucket>`` there (listed in that slot's ``heads``), and
``stray-homes`` (in the bucket's own slot: other slots holding timelines of
this slot's buckets) makes it findable for lease and next_due. With one slot
there are no strays.

Lua scripts receive a slot's fixed keys in KEYS and build the per-message and
per-timeline keys from the slot prefix and the suffixes below (``RECORD``, ...),
all under the same hash tag — the form Redis Cluster accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE = "dejaq"
TOPICS = f"{NAMESPACE}:topics"
# string: a random id set once, when the first broker asks (the storage's identity)
IDENTITY = f"{NAMESPACE}:identity"
# string: the version of this layout, set by the first broker that opens the
# store; a broker refuses a store of another version (``FORMAT_VERSION``)
FORMAT = f"{NAMESPACE}:format"
FORMAT_VERSION = 1

# Suffixes after a slot prefix. The Lua scripts get them from here too.
ALIVE = "alive"
TIMELINE = "tl:"
HEADS = "heads"
OWNED = "owned"
DEAD = "dead"
DEAD_IDS = "dead-ids"
STRAY_HOMES = "stray-homes"
ENTERED = "entered"
RECORD = "m:"
PAYLOAD = "p:"
TOMBS = "tombs"
WAITS = "waits"


@dataclass(frozen=True, slots=True)
class Slot:
    """The keys of one (topic, slot)."""

    topic: str
    index: int

    @property
    def prefix(self) -> str:
        return f"{NAMESPACE}:{{{self.topic}:{self.index}}}:"

    @property
    def alive(self) -> str:
        return self.prefix + ALIVE

    def timeline(self, bucket: int) -> str:
        """The timeline of ``bucket`` stored in this slot."""
        return f"{self.prefix}{TIMELINE}{bucket}"

    @property
    def heads(self) -> str:
        return self.prefix + HEADS

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
    def waits(self) -> str:
        return self.prefix + WAITS

    def record(self, id: str) -> str:
        return self.prefix + RECORD + id

    def payload(self, id: str) -> str:
        return self.prefix + PAYLOAD + id
