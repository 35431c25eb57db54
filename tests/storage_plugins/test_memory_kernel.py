"""The memory backend's C kernels and native-int loops against their numpy
reference: the same random operations through a table, the time indexes,
columns or a whole storage running each, every result and the final state
compared.

Under ``DEJAQ_PURE_PYTHON=1`` (or with no compiler) there is no kernel and
both sides run the reference: the stories still hold, and say nothing more."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dejaq.core import hotpath
from dejaq.core.errors import DejaqError
from dejaq.core.model import KIND_PRIORITY, KIND_TIMELINE, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.memory import MemoryStorage, time_index
from dejaq.storage_plugins.memory import blobs as blobs_module
from dejaq.storage_plugins.memory import ids as ids_module
from dejaq.storage_plugins.memory import timeline as timeline_module
from dejaq.storage_plugins.memory.columns import FREE, LIVE, Columns
from dejaq.storage_plugins.memory.ids import IdTable

QUICK = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_kernel_is_built_wherever_the_compiled_modules_run() -> None:
    # Given this install: the kernels are built and refused with the mypyc modules
    compiled = hotpath.is_compiled(ids_module)
    # then a compiled build runs the kernels, and the Python modules never do
    assert (ids_module.KERNEL is not None) == compiled
    assert (blobs_module.KERNEL is not None) == compiled
    assert (timeline_module.KERNEL is not None) == compiled
    assert (timeline_module.OWNER_KERNEL is not None) == compiled
    cols = Columns()
    assert IdTable(cols).native == cols.native == cols.blobs.native == compiled


# -- the id table ------------------------------------------------------------------

# A few hashes for many ids: shared homes, long probe runs, equal hashes told
# apart by the stored id, and a table small enough to wrap round its end.
HASHES = st.sampled_from([0, 1, 2, 1023, 1024, 2047, -1, -1024, 5 << 40, 7])
BATCH = st.lists(st.tuples(st.integers(0, 60), HASHES), min_size=1, max_size=40)
OPS = st.lists(st.tuples(st.sampled_from(["add", "remove"]), BATCH), min_size=1, max_size=12)


class Side:
    """A table with its columns; ids by slot, as the storage keeps them."""

    def __init__(self, native: bool) -> None:
        self.cols = Columns()
        self.table = IdTable(self.cols)
        self.table.native = native and ids_module.KERNEL is not None
        self.slot_of: dict[str, int] = {}

    def add(self, batch: list[tuple[str, int]]) -> list[int]:
        """Enter the ids of ``batch`` not in the table yet, as ``Timeline.insert`` does."""
        names = [n for n, _ in batch]
        hashes = np.array([h for _, h in batch], np.int64)
        found, spots = self.table.find_with_spots(names, hashes)
        new = [i for i, f in enumerate(found.tolist()) if f < 0 and names[i] not in names[:i]]
        if new:
            slots = self.cols.allocate(len(new))
            self.cols.state[slots] = LIVE
            self.cols.id_hash[slots] = hashes[new]
            self.cols.store(slots, [names[i].encode() for i in new], [b""] * len(new))
            self.table.add(hashes[new], slots, spots[new])
            self.slot_of.update(zip([names[i] for i in new], slots.tolist(), strict=True))
        return found.tolist()

    def remove(self, names: list[str]) -> None:
        gone = sorted({self.slot_of.pop(n) for n in names if n in self.slot_of})
        if gone:
            slots = np.array(gone, np.int64)
            self.table.remove(slots)
            self.cols.release(slots)


@QUICK
@given(ops=OPS, queries=BATCH)
def test_the_id_kernel_finds_and_places_as_the_numpy_loops_do(
    ops: list[tuple[str, list[tuple[int, int]]]], queries: list[tuple[int, int]]
) -> None:
    # Given two tables, one on the kernel and one on the numpy loops
    native, reference = Side(True), Side(False)
    seen: dict[str, int] = {}
    # when the same batches of ids (few distinct hashes) are added and removed
    for op, batch in ops:
        named = [(f"id{n}-{h}", h) for n, h in batch]
        seen.update(named)
        if op == "add":
            # then every lookup finds the same slot (or none)
            assert native.add(named) == reference.add(named)
        else:
            native.remove([n for n, _ in named])
            reference.remove([n for n, _ in named])
        native.table.check()
        reference.table.check()
    # and in the end every id ever named is found alike
    names = list(seen)
    hashes = np.array(list(seen.values()), np.int64)
    assert native.table.find(names, hashes).tolist() == reference.table.find(names, hashes).tolist()
    assert len(native.table) == len(reference.table)
    # and on one table's state the two probes agree position for position
    probe = np.array([h for _, h in queries], np.int64)
    kernel = native.table._probe(probe)
    native.table.native = False
    python = native.table._probe(probe)
    assert kernel[0].tolist() == python[0].tolist()
    assert kernel[1].tolist() == python[1].tolist()


def test_a_table_kept_near_full_of_deleted_positions_finds_every_id() -> None:
    # Given a table churned in batches (placed, then removed as acks leave them)
    native, reference = Side(True), Side(False)
    for start in range(0, 6_000, 150):
        batch = [(f"m{i}", hash(f"m{i}")) for i in range(start, start + 150)]
        assert native.add(batch) == reference.add(batch)
        old = [f"m{i}" for i in range(start - 300, start - 150)]
        native.remove(old)
        reference.remove(old)
    # then both hold the same ids, every one where the columns say
    native.table.check()
    reference.table.check()
    live = np.flatnonzero(native.cols.state[: native.cols.used] != FREE)
    assert len(live) == len(native.table) == len(reference.table) == 300


# -- the time index ------------------------------------------------------------------

# Due times from now: in the heap, in this window, the next ones, and far off.
DUE = st.sampled_from([-3, 0, 2, 4_000, 5_000, 70_000, 1 << 20, 3 << 20, 1 << 28, 5 << 28])
PUSHES = st.lists(
    st.tuples(
        st.lists(st.tuples(st.integers(0, 3), DUE, st.integers(0, 9)), min_size=1, max_size=40),
        st.integers(0, 1 << 21),  # how far the clock moves after the batch
    ),
    min_size=1,
    max_size=8,
)


@QUICK
@given(batches=PUSHES)
def test_entries_pushed_one_at_a_time_are_found_as_those_pushed_by_columns(
    batches: list[tuple[list[tuple[int, int, int]], int]],
) -> None:
    # Given the lanes of four buckets twice over one set of columns
    cols = Columns()
    each = [time_index.TimeIndex(b, cols) for b in range(4)]
    arrays = [time_index.TimeIndex(b, cols) for b in range(4)]
    now = 1 << 30
    for lanes in (each, arrays):
        for lane in lanes:
            lane.advance(now)
    # when the same batches are pushed, one entry at a time and a column at a time,
    # the clock moving on between them
    for batch, step in batches:
        slots = cols.allocate(len(batch))
        buckets = np.array([b for b, _, _ in batch], np.int64)
        times = np.array([now + due + jitter for _, due, jitter in batch], np.int64)
        cols.state[slots] = LIVE
        cols.bucket[slots] = buckets
        cols.timestamp[slots] = times
        time_index.push_each(each, buckets, times, slots)
        time_index.push_arrays(arrays, buckets, times, slots)
        now += step
        # then every lane names the same earliest time, and gives the same entries due
        for one, other in zip(each, arrays, strict=True):
            assert one.first() == other.first()
            one.advance(now)
            other.advance(now)
            assert _due(one, now) == _due(other, now)


def _due(lane: time_index.TimeIndex, now: int) -> list[int]:
    keys, times, slots = lane.due(now)
    pending = [] if times is None or slots is None else (times << 32 | slots).tolist()
    return sorted(k for k in [*keys, *pending] if lane.current_one(k))


# -- the records -------------------------------------------------------------------

RECORD = st.tuples(
    st.text(min_size=1, max_size=12),  # the id (any UTF-8)
    st.binary(max_size=300),  # the payload: rows of several widths
    st.text(max_size=4),  # the key
    st.binary(max_size=8),  # the headers
)


@QUICK
@given(batches=st.lists(st.lists(RECORD, min_size=1, max_size=30), min_size=1, max_size=5))
def test_records_are_written_and_read_back_as_the_python_loops_do(
    batches: list[list[tuple[str, bytes, str, bytes]]],
) -> None:
    # Given two columns, one copying and reading records in C and one in Python
    sides = [Columns(), Columns()]
    sides[1].native = sides[1].blobs.native = False
    slots: list[int] = []
    # when the same batches are stored (some freed again, their rows reused)
    for n, batch in enumerate(batches):
        for cols in sides:
            got = cols.allocate(len(batch))
            cols.store(
                got,
                [id.encode() for id, _, _, _ in batch],
                [payload for _, payload, _, _ in batch],
                [key.encode() for _, _, key, _ in batch],
                [headers for _, _, _, headers in batch],
            )
        slots += got.tolist()
        if n % 2:
            freed = np.array(slots[: len(slots) // 3], np.int64)
            slots = slots[len(slots) // 3 :]
            for cols in sides:
                cols.release(freed)
    # then every record reads back the same, ids and payloads and extras
    at = np.array(slots, np.int64)
    native, reference = sides
    assert native.records(at) == reference.records(at)
    assert native.extras(at) == reference.extras(at)
    native.native = False
    assert native.records(at) == reference.records(at)


# -- a whole storage -----------------------------------------------------------------

TOPIC = "t"
IDS = [f"m{i}" for i in range(24)]
KEYS = ["", "", "a", "b"]

INSERT = st.tuples(
    st.just("insert"),
    st.lists(
        st.tuples(
            st.integers(0, len(IDS) - 1),  # the id: repeats are duplicates
            st.integers(-5, 20),  # due, from now
            st.integers(0, len(KEYS) - 1),
            st.sampled_from([0, 0, 1, 2]),  # max deliveries
            st.sampled_from([0, 0, 15]),  # expires, from now
        ),
        min_size=1,
        max_size=12,
    ),
)
LEASE = st.tuples(
    st.just("lease"),
    st.integers(1, 10),
    st.sampled_from(["c1", "c2"]),
    st.sampled_from([None, {"a": 1}, {"": 2, "b": 0}]),
)
SETTLE = st.tuples(
    st.sampled_from(["ack", "nack", "extend"]),
    st.sampled_from(["holder", "holder", "c1"]),  # mostly the lease's own holder
    st.lists(st.integers(0, 8), min_size=1, max_size=6),  # which leases, latest first
    st.integers(0, 20),  # a nack's delay
)
CANCEL = st.tuples(st.just("cancel"), st.integers(0, len(IDS) - 1), st.integers(0, 4))
TICK = st.tuples(st.just("tick"), st.integers(1, 30))
FORGET = st.tuples(st.just("forget"), st.integers(1, 5))
PROMOTE = st.tuples(st.just("promote"), st.integers(1, 10))  # a priority topic's
# Inserts, leases and settles the most often: they make the state the others act on.
STEPS = st.lists(
    st.one_of(INSERT, INSERT, LEASE, LEASE, SETTLE, SETTLE, CANCEL, TICK, FORGET, PROMOTE),
    min_size=4,
    max_size=30,
)
KINDS = st.sampled_from([KIND_TIMELINE, KIND_TIMELINE, KIND_PRIORITY])
# A small clock, and today's: an index entry (timestamp << 32 | slot) then
# outgrows 64 bits.
STARTS = st.sampled_from([1_000, 1_764_000_000_000])


def _plain(value: Any) -> Any:
    """An error as its type and text (errors compare by identity), in a list too."""
    if isinstance(value, DejaqError):
        return (type(value).__name__, str(value))
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


async def _outcome(call: Awaitable[Any]) -> Any:
    """What a call returns, or the error it raises."""
    try:
        return _plain(await call)
    except DejaqError as exc:
        return _plain(exc)


async def _storage(native: bool, kind: str = KIND_TIMELINE) -> MemoryStorage:
    # Few tombstones, so evicting them (ids leaving the table) is exercised too.
    storage = MemoryStorage("memory://?max_tombstones=4")
    await storage.open()
    settings = TopicSettings(buckets=4, max_deliveries=3, kind=kind)
    await storage.create_topic(Topic(TOPIC, settings))
    if not native:
        tl = storage._timelines[TOPIC]
        tl.ids.native = tl.cols.native = tl.cols.blobs.native = tl.native = False
    return storage


async def _run(storage: MemoryStorage, steps: list[tuple[Any, ...]], start: int) -> list[Any]:
    """Every step's result, then the final state of every id and the counts."""
    now = start
    priority = storage._timelines[TOPIC].ranks is not None
    leased: list[tuple[str, int, str]] = []  # id, version, holder
    results: list[Any] = []
    for step in steps:
        kind = step[0]
        if kind == "insert":
            batch = [
                NewMessage(
                    IDS[i], now + due, b"p%d" % i, i % 4, md, now + ex if ex else 0, 0, KEYS[k]
                )
                for i, due, k, md, ex in step[1]
            ]
            results.append(await _outcome(storage.insert(TOPIC, batch)))
        elif kind == "lease":
            _, limit, owner, caps = step
            request = LeaseRequest.of(TOPIC, None, now, limit, 30, owner, caps=caps)
            got = await storage.lease(request)
            leased += [(m.id, m.version, owner) for m in got.delivered]
            results.append(got)
        elif kind in ("ack", "nack", "extend"):
            _, who, picks, delay = step
            chosen = [leased[-1 - p] for p in picks if p < len(leased)]
            if not chosen:
                continue
            owner = chosen[0][2] if who == "holder" else who
            items = list(dict.fromkeys((id, version) for id, version, _ in chosen))
            if kind == "ack":
                call = storage.ack(TOPIC, items, owner, now)
            elif kind == "nack":
                call = storage.nack(TOPIC, items, owner, now + delay, 3)
            else:
                call = storage.extend(TOPIC, items, owner, now + delay)
            results.append(await _outcome(call))
        elif kind == "cancel":
            _, i, version = step
            results.append(await _outcome(storage.cancel(TOPIC, IDS[i], version, now)))
        elif kind == "tick":
            now += step[1]
        elif kind == "promote":
            if priority:
                results.append(await storage.promote(TOPIC, None, now, step[1]))
        else:
            results.append(await storage.purge_tombstones(TOPIC, now, step[1]))
    for id in IDS:
        results.append(await _outcome(storage.get(TOPIC, id)))
    results.append(await storage.counts(TOPIC, now))
    results.append(await storage.list_dead(TOPIC, "", 100))
    tl = storage._timelines[TOPIC]
    tl.ids.check()
    results += [tl.held, tl.owners.names, tl.cols.owner[: tl.cols.used].tolist()]
    return results


@QUICK
@given(steps=STEPS, kind=KINDS, start=STARTS)
def test_a_storage_on_the_kernels_answers_as_one_on_the_reference(
    steps: list[tuple[Any, ...]], kind: str, start: int
) -> None:
    # Given two storages of a topic of either kind, one on the kernels and one
    # on the Python reference
    async def both() -> tuple[list[Any], list[Any]]:
        native, reference = await _storage(True, kind), await _storage(False, kind)
        # when the same operations run through each
        return await _run(native, steps, start), await _run(reference, steps, start)

    native, reference = asyncio.run(both())
    # then every result, and the final state, is the same
    assert native == reference


# -- a lease's selection among stale entries ---------------------------------------

SELECT_STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("insert"),
            st.lists(st.tuples(st.integers(-5, 40), st.integers(0, len(KEYS) - 1)), max_size=12),
        ),
        st.tuples(st.just("move"), st.lists(st.integers(0, 40), max_size=6), st.integers(-5, 40)),
        st.tuples(st.just("kill"), st.lists(st.integers(0, 40), max_size=4)),
        st.tuples(
            st.just("select"),
            st.integers(1, 12),
            st.sampled_from([None, (0, 2)]),
            st.sampled_from(["c1", "c2"]),
        ),
        st.tuples(st.just("tick"), st.integers(1, 20)),
    ),
    min_size=1,
    max_size=25,
)


def _select_run(native: bool, kind: str, start: int, steps: list[tuple[Any, ...]]) -> list[Any]:
    """Each selection's slots and dues on a timeline whose messages move often,
    leaving stale entries behind; the selected are leased (moved on) as a lease
    does. Then who holds what: the owners by slot, the held ids, the names."""
    tl = timeline_module.Timeline(Topic(TOPIC, TopicSettings(buckets=4, kind=kind)))
    tl.native = native
    now, made, out = start, 0, []
    for step in steps:
        live = np.flatnonzero(tl.cols.state[: tl.cols.used] == LIVE)
        if step[0] == "insert" and step[1]:
            batch = [
                NewMessage(f"s{made + i}", now + due, b"", (made + i) % 4, 0, 0, 0, KEYS[k])
                for i, (due, k) in enumerate(step[1])
            ]
            made += len(batch)
            tl.insert(batch)
        elif step[0] in ("move", "kill") and len(live):
            picked = np.unique(live[[p % len(live) for p in step[1]]])
            if step[0] == "move":
                tl.reschedule(picked, now + step[2], None)
            else:
                tl.kill(picked, now)
        elif step[0] == "select":
            slots, dues = tl.select(step[2], now, step[1])
            out.append((slots, dues))
            tl.reschedule(np.array(slots, np.int64), now + 30, step[3])
        elif step[0] == "tick":
            now += step[1]
    out += [tl.cols.owner[: tl.cols.used].tolist(), tl.held, tl.owners.names, tl.owned]
    return out


@QUICK
@given(steps=SELECT_STEPS, kind=KINDS, start=STARTS)
def test_a_selection_among_stale_entries_and_its_owners_are_the_references(
    steps: list[tuple[Any, ...]], kind: str, start: int
) -> None:
    # Given two timelines, one selecting and owning in C and one in Python, whose
    # messages are moved and killed between selections (stale entries left behind)
    # when the same steps run through each
    native = _select_run(True, kind, start, steps)
    reference = _select_run(False, kind, start, steps)
    # then every selection takes the same slots at the same dues, in order, and
    # the same messages end up held by the same owners
    assert native == reference


def test_two_owners_at_once_each_give_their_number_back_on_either_side() -> None:
    # Given a storage on the kernels and one on the reference, where two
    # consumers hold messages at once (owner numbers 1 and 2)
    async def held_after(native: bool) -> list[Any]:
        storage = await _storage(native)
        batch = [NewMessage(IDS[i], 1_000, b"", i % 4) for i in range(4)]
        await storage.insert(TOPIC, batch)
        first = await storage.lease(LeaseRequest.of(TOPIC, None, 1_000, 2, 30, "c1"))
        second = await storage.lease(LeaseRequest.of(TOPIC, None, 1_000, 2, 30, "c2"))
        tl = storage._timelines[TOPIC]
        both = [list(tl.owners.names), len(tl.held)]
        # when the second, then the first, acks all it holds
        for got, owner in ((second, "c2"), (first, "c1")):
            items = [(m.id, m.version) for m in got.delivered]
            await storage.ack(TOPIC, items, owner, 1_000)
        return [*both, tl.owners.names, tl.held]

    # then each number was taken and given back, and nothing is held
    native, reference = asyncio.run(held_after(True)), asyncio.run(held_after(False))
    assert native == reference == [[None, "c1", "c2"], 4, [None, None, None], {}]


def test_a_settle_naming_a_message_not_held_as_quoted_is_refused_on_either_side() -> None:
    # Given a storage on the kernels and one on the reference, c1 holding three
    # messages and c2 one
    async def answers(native: bool) -> list[Any]:
        storage = await _storage(native)
        batch = [NewMessage(IDS[i], 1_000 + i, b"", i % 4) for i in range(4)]
        await storage.insert(TOPIC, batch)
        got = await storage.lease(LeaseRequest.of(TOPIC, None, 1_002, 3, 30, "c1"))
        x, y, z = ((m.id, m.version) for m in got.delivered)
        second = await storage.lease(LeaseRequest.of(TOPIC, None, 1_003, 1, 30, "c2"))
        (w,) = ((m.id, m.version) for m in second.delivered)
        # when c2 settles two of c1's, c1 quotes a stale version, then both settle right
        return [
            await _outcome(storage.ack(TOPIC, [x, y], "c2", 1_003)),
            await _outcome(storage.ack(TOPIC, [x, (y[0], y[1] - 1)], "c1", 1_003)),
            await _outcome(storage.ack(TOPIC, [y, z], "c1", 1_003)),
            await _outcome(storage.ack(TOPIC, [w], "c2", 1_003)),
        ]

    native, reference = asyncio.run(answers(True)), asyncio.run(answers(False))
    # then each side refuses the same items for the same reasons, and acks the rest
    assert native == reference
    # (a refusal is its error's name and text, a settled item a Settled)
    kinds = [[o[0] if type(o) is tuple else type(o).__name__ for o in a] for a in native]
    assert kinds == [
        ["NotLeaseHolder", "NotLeaseHolder"],
        ["Settled", "StaleVersion"],
        ["Settled", "Settled"],
        ["Settled"],
    ]


@pytest.mark.parametrize("wrong", ["state", "timestamp", "bucket", "lane"])
def test_a_column_of_the_wrong_item_size_is_refused_by_the_selection(wrong: str) -> None:
    # Given a timeline's columns, one of them handed over with the wrong item size
    cols = Columns()
    columns = {name: getattr(cols, name) for name in ("state", "timestamp", "bucket", "lane")}
    columns[wrong] = np.zeros(4, np.int8 if columns[wrong].itemsize != 1 else np.int64)
    if timeline_module.KERNEL is None:  # the reference build: no kernel to hand them to
        assert not hotpath.is_compiled(timeline_module)
        return
    # when the selection kernel is called with it, then it refuses that column by
    # name, with no result made up (every way out returns the one it set)
    with pytest.raises(TypeError, match=f"{wrong}: a 1-d array"):
        timeline_module.KERNEL.select([], 0, 1, *columns.values(), -1, set(), [], [])
