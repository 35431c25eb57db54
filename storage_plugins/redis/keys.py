"""Every Redis key of the ``redis://`` backend, built in one place (as arq's ``constants``).

Layout. One global hash, ``dejaq:topics`` (topic name -> JSON of its settings,
creation time and *generation*, a random token per incarnation of the name).
Everything else belongs to one (topic, home bucket) *slot* and starts with
``dejaq:{<topic>:<home>}:``, whose ``{...}`` hash tag puts all keys of a slot
in one Redis Cluster hash slot, so every Lua script touches one slot only:

- ``alive``            string: the topic's generation. Written by create_topic,
                       removed by delete_topic; every script checks it first, so
                       a process with a stale topic cache never writes into a
                       deleted (or deleted and re-created) topic.
- ``tl:<bucket>``      sorted set: the live timeline, member = message id,
                       score = timestamp (leased ones at their lease expiry).
- ``owned``            sorted set: the live messages that have a lease owner,
                       score = timestamp (so ``leased`` is one ZCOUNT).
- ``dead``             sorted set: dead messages scored by time of death (purge).
- ``dead-ids``         sorted set, every score 0: the same ids in byte order,
                       for ``list_dead`` paging with ZRANGE ... BYLEX.
- ``m:<id>``           hash: the message's metadata record (ts, v, n, o, b, md,
                       ex, dead — see ``scripts``).
- ``p:<id>``           string: the payload, apart from the record, so no
                       mutation ever rewrites it.

The *home* of a message is ``bucket_of(id, buckets)`` (crc32, as the broker
computes buckets): storage finds a message from its id alone. The broker always
produces ``bucket == home``, so each slot holds exactly one timeline,
``tl:<home>``. A caller may pass another bucket (the conformance suite does);
such a *stray* still lives in its home slot, on a timeline ``tl:<bucket>`` of
that slot, and two small add-only sets make it findable:

- ``stray-timelines``  (in the home slot) buckets with a timeline in this slot
                       besides ``tl:<home>`` (for counts and delete_topic);
- ``stray-homes``      (in the bucket's own slot) home slots holding strays of
                       this bucket (for lease and next_due).

Lua scripts receive a slot's fixed keys in KEYS and build the per-message and
per-timeline keys from the slot prefix and the suffixes below (``RECORD``, ...),
all under the same hash tag — the form Redis Cluster accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE = "dejaq"
TOPICS = f"{NAMESPACE}:topics"

# Suffixes after a slot prefix. The Lua scripts get them from here too.
ALIVE = "alive"
TIMELINE = "tl:"
OWNED = "owned"
DEAD = "dead"
DEAD_IDS = "dead-ids"
STRAY_TIMELINES = "stray-timelines"
STRAY_HOMES = "stray-homes"
RECORD = "m:"
PAYLOAD = "p:"


@dataclass(frozen=True, slots=True)
class Slot:
    """The keys of one (topic, home bucket) slot."""

    topic: str
    home: int

    @property
    def prefix(self) -> str:
        return f"{NAMESPACE}:{{{self.topic}:{self.home}}}:"

    @property
    def alive(self) -> str:
        return self.prefix + ALIVE

    def timeline(self, bucket: int | None = None) -> str:
        """The timeline of ``bucket`` stored in this slot (default: the slot's own)."""
        return f"{self.prefix}{TIMELINE}{self.home if bucket is None else bucket}"

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
    def stray_timelines(self) -> str:
        return self.prefix + STRAY_TIMELINES

    @property
    def stray_homes(self) -> str:
        return self.prefix + STRAY_HOMES

    def record(self, id: str) -> str:
        return self.prefix + RECORD + id

    def payload(self, id: str) -> str:
        return self.prefix + PAYLOAD + id
