"""The Lua scripts of the ``redis://`` backend, and how they are called.

Each script (``lua/<name>.lua``) is one storage call made atomic on one
(topic, slot) (see ``keys`` for the layout); its header comment lists its
KEYS, ARGV and reply.

Conventions. ``KEYS[1]`` is always the slot's ``alive`` key and ``ARGV[1]`` the
topic generation the caller believes in: a script whose topic is gone (or
re-created) answers ``{GONE}`` before touching anything. ``ARGV[2]`` is the slot
prefix from which per-message keys are built. Keys a call may or may not need
(``tombs``: the topic keeps tombstones; ``waits``: it is a priority topic) come
last and are found by name (``optional`` in ``helpers.lua``). Replies start with a status
(``OK``). Timestamps travel as decimal strings and are written back as given:
Lua's own number-to-string (``tostring``, ``..``) keeps only 14 digits, so
numbers are formatted with ``int`` (``%d``: exact to 2^63).

The hot-path replies (peek, lease, settle) are packed: numbers as one
comma-separated string, ids and payloads as one blob with their lengths in the
numbers. redis-py's pure-Python parser pays ~2 us per reply element: a lease
of 100 messages is 4 elements instead of 500, and costs the client 0.13 ms of
CPU instead of 1.05 ms (measured).

A message's record is one packed value in the slot's ``records`` hash
(``record``: timestamp, version, deliveries, bucket, max deliveries, expiry,
dead, priority, lease owner, then the payload up to 1 KiB; a larger one is a
value of the ``payloads`` hash), or a tombstone (``K_TOMB_SIZE`` bytes: the
time of deletion), which ``load`` and ``load_all`` read as no record. A script
reads the records of a batch in one HMGET and writes those it changed in one
HSET at its end (``load_all``, ``dirty`` and ``flush`` in ``helpers.lua``): no
command a message on the hot paths (insert, lease, settle).

A priority topic's ranks (``core.priority``: negative timestamps down to
``-RANK_BASE``, 14 digits) live in the same scores and records: a double holds
them exactly, and they travel as decimal text like any timestamp (``rank`` in
``helpers.lua`` formats with ``int``).

The rules of ``rules.py`` that must run next to the data (who may settle or
move, the effective max deliveries, a lease pass's fate for a message, when a
nack dead-letters) are repeated in ``helpers.lua`` under the same names;
``tests/storage_plugins/test_redis.py`` runs a table of cases through both
(``program`` builds the Lua for such a probe). A refused item returns its code
with the record's (version, timestamp, owner) so the Python side builds the
exception with ``rules`` itself: same class, same text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from redis import exceptions as rex
from redis.asyncio import Redis

from dejaq.core.errors import StorageError, StorageRefused, StorageUnavailable
from dejaq.storage_plugins.redis import keys, record

# Reply status and refusal codes, shared with the Lua constants below.
OK = 0
GONE = -1  # the topic generation in the slot is not the caller's
STRAYS = -2  # lease refused a solo call: strays of the slot's buckets live in other slots
KEYED = -3  # lease refused a share: keyed messages are due, the pass must share among keys
NOT_FOUND, NOT_HOLDER, STALE, LEASED = 1, 2, 3, 4

# Widths of the per-item groups in replies.
# numbers: bucket, due timestamp, version, deliveries, priority, id length, payload
# length, key length, headers length
LEASED_ITEM = 9
# A lease reply's numbers: LEASED_ITEM little-endian doubles a delivery.
LEASED_NUMBERS = "<" + "d" * LEASED_ITEM
SETTLED_ITEM = 3  # numbers: code, version, timestamp
READ_ITEM = 13  # elements: found, ts, v, n, o, b, md, ex, dead, p, payload, key, headers

CONSTANTS = f"""
local K_TIMELINE, K_RECORDS, K_PAYLOADS = '{keys.TIMELINE}', '{keys.RECORDS}', '{keys.PAYLOADS}'
local K_ENTERED, K_RECORD = '{keys.ENTERED}', '{record.LAYOUT}'
local K_HEADERS = '{keys.HEADERS}'
local K_GRANTED, K_GRANT = '{keys.GRANTED}', '{keys.GRANT}'
local K_TOMB, K_TOMB_SIZE = '{record.TOMB}', {record.TOMB_SIZE}
local K_NUMBERS, K_INLINE_MAX = '{LEASED_NUMBERS}', {record.INLINE_MAX}
local K_V1_RECORD, K_V1_PAYLOAD = '{keys.V1_RECORD}', '{keys.V1_PAYLOAD}'
local OK, GONE, STRAYS, KEYED = {OK}, {GONE}, {STRAYS}, {KEYED}
local NOT_FOUND, NOT_HOLDER, STALE, LEASED = {NOT_FOUND}, {NOT_HOLDER}, {STALE}, {LEASED}
"""

_LUA = resources.files(__package__) / "lua"


def _source(name: str) -> str:
    return (_LUA / f"{name}.lua").read_text(encoding="utf-8")


def _helpers() -> dict[str, str]:
    """The functions of ``helpers.lua`` by name, each with its leading comment, in order."""
    chunks = re.split(r"\n\n+(?=(?:--[^\n]*\n)*local function )", _source("helpers"))
    found = (re.search(r"^local function (\w+)\(", c, re.MULTILINE) for c in chunks)
    return {m.group(1): c.strip("\n") + "\n" for c, m in zip(chunks, found, strict=True) if m}


# A script includes only the helpers it calls: every helper included costs a
# closure on every call (all of them: 2.5 us per call, more than a peek's work).
HELPERS = _helpers()


def program(body: str) -> str:
    """A Lua script: ``body`` after the constants and the helpers it calls."""
    return _prelude(body) + body


def _prelude(body: str) -> str:
    """The constants and the helpers ``body`` calls, directly or through another helper."""
    needed: set[str] = set()
    text = body
    for name in reversed(HELPERS):  # callers come after their callees
        if re.search(rf"\b{name}\(", text):
            needed.add(name)
            text += HELPERS[name]
    return CONSTANTS + "".join(HELPERS[name] for name in HELPERS if name in needed)


# A Redis Cluster moving a slot lets a script read a key of it only while the
# slot has no key elsewhere; it fails any command on a key missing there (moved
# already, or never written) with "non local key", and a script's earlier writes
# stay. So on a cluster every script first reads a key that never exists: it
# fails before writing anything whenever its slot is moving, and the client
# sends it again once the move is over (``cluster``).
MOVE_GUARD = "redis.call('EXISTS', KEYS[1] .. ':~')\n"


@dataclass(frozen=True, slots=True)
class Script:
    """``lua/<name>.lua`` with the helpers it needs, called by SHA1 (EVALSHA);
    ``guarded``: with ``MOVE_GUARD`` first, as a Redis Cluster runs it."""

    name: str
    guarded: bool = False
    source: str = field(init=False)
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        source = (MOVE_GUARD if self.guarded else "") + program(_source(self.name))
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "sha", hashlib.sha1(source.encode()).hexdigest())


INSERT = Script("insert")
PEEK = Script("peek")
NEXT_DUE = Script("next_due")
LEASE = Script("lease")
PROMOTE = Script("promote")
SETTLE = Script("settle")
MUTATE = Script("mutate")
READ = Script("read")
RELEASE = Script("release")
COUNTS = Script("counts")
OLDEST = Script("oldest")
FORECAST = Script("forecast")
DEAD_PAGE = Script("dead_page")
REDRIVE = Script("redrive")
PURGE = Script("purge")
DROP = Script("drop")
FORGET = Script("forget")
PURGE_TOMBS = Script("purge_tombs")
FORGET_TOMBS = Script("forget_tombs")
REPLACE = Script("replace")
UPGRADE = Script("upgrade")
UPGRADE_TOMBS = Script("upgrade_tombs")
UPGRADE_GRANTS = Script("upgrade_grants")
BUSIEST = Script("busiest")
KEYS_DUE = Script("keys_due")
KEYS_SAMPLE = Script("keys_sample")

# Loaded together when the backend opens and after a NOSCRIPT.
ALL: tuple[Script, ...] = (INSERT, PEEK, NEXT_DUE, LEASE, SETTLE, MUTATE, READ, RELEASE, COUNTS)
ALL += (DEAD_PAGE, REDRIVE, PURGE, DROP, FORGET, PURGE_TOMBS, FORGET_TOMBS, REPLACE, PROMOTE)
ALL += (OLDEST, FORECAST, UPGRADE, UPGRADE_TOMBS, UPGRADE_GRANTS, BUSIEST, KEYS_DUE, KEYS_SAMPLE)

# As a Redis Cluster runs them: guarded, except the registry's (their one key is
# declared, so the cluster itself redirects them while it moves).
CLUSTER: dict[Script, Script] = {
    s: s if s in (REPLACE, FORGET) else Script(s.name, guarded=True) for s in ALL
}


# -- calling them ------------------------------------------------------------

# Errors that mean "cannot reach a working server now": retry later.
_UNAVAILABLE = (
    rex.ConnectionError,
    rex.TimeoutError,
    rex.BusyLoadingError,
    rex.ReadOnlyError,
    rex.MasterDownError,
    rex.TryAgainError,
    rex.OutOfMemoryError,
    OSError,
)

Arg = str | int | bytes
# What one send of a batch gives: its replies, the fewest replicas that
# acknowledged it, and the calls failed on their own (by index in the batch).
Sent = tuple[list[Any], int, dict[int, StorageUnavailable]]
# A reply that came after its call had given up on it (``ClusterRunner``): the
# call's index and the reply, so the caller can undo what it did.
Late = Callable[[int, Any], None]


def storage_error(exc: BaseException) -> StorageError:
    """The dejaq error for a redis-py error (raise it ``from exc``)."""
    if isinstance(exc, rex.AuthenticationError):  # a ConnectionError, but no retry helps
        return StorageRefused(f"redis: {exc}")
    if isinstance(exc, _UNAVAILABLE):
        return StorageUnavailable(f"redis: {exc}")
    return StorageError(f"redis: {exc}")


@dataclass(frozen=True, slots=True)
class Call:
    """One EVALSHA of ``script``, or (no script) one plain command ``args``."""

    script: Script | None
    keys: Sequence[str]
    args: Sequence[Arg]

    def command(self) -> tuple[Arg, ...]:
        if self.script is None:
            return tuple(self.args)
        return ("EVALSHA", self.script.sha, len(self.keys), *self.keys, *self.args)


class Runner:
    """Sends calls in one round trip, reloading scripts the server lost.

    Scripts are called by SHA1 only (EVALSHA); a server that answers NOSCRIPT
    (restarted, or SCRIPT FLUSH) gets every script loaded again and the refused
    calls sent once more: a refused call did nothing, so this is safe.
    """

    def __init__(self, client: Redis, wait: tuple[int, int] | None = None) -> None:
        self._client = client
        self._wait = wait  # every call's, besides those asked by ``run``

    async def load(self) -> None:
        """SCRIPT LOAD every script (the server checks our SHA1 matches)."""
        pipe = self._client.pipeline(transaction=False)
        for script in ALL:
            pipe.execute_command("SCRIPT", "LOAD", script.source)
        try:
            shas = await pipe.execute()
        except rex.RedisError as exc:
            raise storage_error(exc) from exc
        for script, sha in zip(ALL, shas, strict=True):
            if _text(sha) != script.sha:
                raise StorageError(
                    f"redis: script {script.name} loaded as {sha!r}, not {script.sha}"
                )

    async def command(self, *args: Arg, durable: bool = True) -> Any:
        """One plain command's reply (``durable``: as ``run``)."""
        [reply] = await self.run([Call(None, (), args)], durable=durable)
        return reply

    async def run(
        self,
        calls: Sequence[Call],
        *,
        atomic: bool = False,
        wait: tuple[int, int] | None = None,
        durable: bool = True,
    ) -> list[Any]:
        """The replies of ``calls``, in order.

        ``atomic``: wrap them in MULTI / EXEC, so no other client's command runs
        in between and a connection lost before EXEC applies none of them (a
        single server; Redis Cluster refuses a transaction over several slots).
        ``wait=(replicas, timeout_ms)``: end with WAIT on the same connection and
        raise ``StorageUnavailable`` when fewer replicas acknowledged the writes.
        ``durable=False``: no WAIT at all, for reads and for lease moves (a
        lease pass, an extend, a nack, a release), whose loss in a failover only
        means a redelivery: they go on while a master has no replica.
        """
        if not calls:
            return []
        wait = (wait or self._wait) if durable else None

        async def send(batch: Sequence[Call]) -> Sent:
            replies, acked = await self._send(batch, atomic, wait)
            return replies, acked, {}

        replies, least = await self._reloading(calls, send)
        if wait is not None and least < wait[0]:
            raise StorageUnavailable(
                f"redis: {least} of {wait[0]} replicas acknowledged the write within {wait[1]} ms"
            )
        return replies

    async def _reloading(
        self, calls: Sequence[Call], send: Callable[[Sequence[Call]], Awaitable[Sent]]
    ) -> tuple[list[Any], int]:
        """The replies of ``calls`` sent by ``send``, those refused with NOSCRIPT
        sent once more after ``load``; and the fewest replicas any attempt
        reached. A reply ``send`` failed on its own (its third item) stands as
        that ``StorageUnavailable``; any other error reply raises."""
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        acks = []
        for attempt in (1, 2):
            sent, acked, failed = await send([calls[i] for i in todo])
            acks.append(acked)
            again = []
            for j, (i, reply) in enumerate(zip(todo, sent, strict=True)):
                if j in failed:
                    replies[i] = failed[j]
                elif isinstance(reply, rex.NoScriptError) and attempt == 1:
                    again.append(i)
                elif isinstance(reply, Exception):
                    raise storage_error(reply) from reply
                else:
                    replies[i] = reply
            if not again:
                break
            await self.load()
            todo = again
        return replies, min(acks)

    async def run_each(
        self, calls: Sequence[Call], durable: bool = True, late: Late | None = None
    ) -> list[Any]:
        """``run``; on a store of several servers (a cluster) a server that fails
        its part, or does not answer in time, fails only its own calls: their
        replies are ``StorageUnavailable`` instances, and ``late`` gets the
        replies of those that ran after all (``cluster.ClusterRunner``)."""
        return await self.run(calls, durable=durable)

    async def _send(
        self, calls: Sequence[Call], atomic: bool, wait: tuple[int, int] | None
    ) -> tuple[list[Any], int]:
        multi = atomic and len(calls) > 1
        pipe = self._client.pipeline(transaction=False)
        if multi:
            pipe.execute_command("MULTI")
        for call in calls:
            pipe.execute_command(*call.command())
        if multi:
            pipe.execute_command("EXEC")
        if wait is not None:
            pipe.execute_command("WAIT", *wait)
        try:
            raw = await pipe.execute(raise_on_error=False)
        except (rex.RedisError, OSError) as exc:
            raise storage_error(exc) from exc
        acked = raw.pop() if wait is not None else 0
        if isinstance(acked, Exception):
            raise storage_error(acked) from acked
        if not multi:
            return raw, int(acked)
        # raw: MULTI's OK, one QUEUED (or an error) per call, then EXEC's replies.
        for queued in raw[1:-1]:
            if isinstance(queued, Exception):
                raise storage_error(queued) from queued
        executed = raw[-1]
        if isinstance(executed, Exception):
            raise storage_error(executed) from executed
        return list(executed), int(acked)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
