"""The memory backend's parts alone: the id table survives hash collisions,
growth and wrap-around; the byte arena gives every record back and reuses rows;
the time index gives entries back in time order across its windows, and names
a message at its earliest time; a lease judges a message by the rules
whenever it may be anything but kept."""

from __future__ import annotations

import heapq
import random

import numpy as np
import pytest

from dejaq.storage_plugins.memory import time_index
from dejaq.storage_plugins.memory.blobs import Blobs
from dejaq.storage_plugins.memory.columns import LIVE, Columns
from dejaq.storage_plugins.memory.ids import IdTable, hashes_of
from dejaq.storage_plugins.memory.storage import _fates
from dejaq.storage_plugins.memory.time_index import LEVEL_BITS, SLOT_MASK, TimeIndex, push_all
from dejaq.storage_plugins.rules import Fate, lease_fate

# -- the id table ---------------------------------------------------------------


def table_with(ids: list[str], hashes: list[int]) -> tuple[Columns, IdTable]:
    cols = Columns()
    table = IdTable(cols)
    add(cols, table, ids, hashes)
    return cols, table


def add(cols: Columns, table: IdTable, ids: list[str], hashes: list[int]) -> np.ndarray:
    slots = cols.allocate(len(ids))
    cols.state[slots] = LIVE
    cols.id_hash[slots] = hashes
    cols.store(slots, [i.encode() for i in ids], [b"payload"] * len(ids))
    table.add(np.array(hashes, np.int64), slots)
    return slots


def test_ids_that_share_a_hash_are_told_apart() -> None:
    # given three ids entered under one hash, and a prefix of one of them
    ids = ["alpha", "beta", "alphabet"]
    cols, table = table_with(ids, [42, 42, 42])
    # then each is found at its own slot and the unknown ones are not
    found = table.find([*ids, "alp", "gamma"], np.array([42] * 5, np.int64))
    assert found.tolist() == [0, 1, 2, -1, -1]
    # and after one is removed the others still are
    table.remove(np.array([1], np.int64))
    cols.state[1] = 0
    assert table.find(ids, np.array([42] * 3, np.int64)).tolist() == [0, -1, 2]
    table.check()


def test_the_table_grows_and_rebuilds_without_losing_an_id() -> None:
    # given many ids entered in batches, so the table grows several times
    ids = [f"k{i}" for i in range(20_000)]
    cols = Columns()
    table = IdTable(cols)
    for start in range(0, len(ids), 3_000):
        part = ids[start : start + 3_000]
        add(cols, table, part, hashes_of(part).tolist())
    assert table.capacity >= len(ids) / 0.7
    # when most are removed, leaving deleted positions behind
    gone = np.arange(0, 18_000, dtype=np.int64)
    table.remove(gone)
    cols.release(gone)
    # then the rest are found and the removed ones are not
    table.check()
    found = table.find(ids, hashes_of(ids))
    assert (found[:18_000] == -1).all()
    assert found[18_000:].tolist() == list(range(18_000, 20_000))
    # and freed slots are reused by the next inserts
    again = add(cols, table, ["new"], [hash("new")])
    assert int(again[0]) < 18_000
    table.check()


def test_a_rebuild_wraps_a_crowd_at_the_end_of_the_table_round_to_the_start() -> None:
    # given a table that must grow for ids that all hash to its last position
    cols = Columns()
    table = IdTable(cols)
    ids = [f"crowd{i}" for i in range(900)]
    hashes = [2047 + k * 2048 for k in range(900)]  # one home after the rebuild, distinct
    add(cols, table, ids[:100], hashes[:100])
    add(cols, table, ids[100:], hashes[100:])
    # then every one is found where the rebuild put it
    table.check()
    assert table.find(ids, np.array(hashes, np.int64)).tolist() == list(range(900))


# -- the byte arena ------------------------------------------------------------


def test_the_arena_gives_every_record_back_and_reuses_freed_rows() -> None:
    # given records of many sizes, one larger than any size class
    blobs = Blobs()
    records = [bytes([n % 251]) * n for n in (0, 1, 15, 16, 17, 300, 5_000, 70_000, 2 << 20)]
    handles = blobs.put(records)
    lengths = np.array([len(r) for r in records], np.int64)
    # then each reads back byte for byte
    assert read_all(blobs, handles, lengths) == records
    # and when they are freed, records of the same sizes take the same rows back
    blobs.free(handles, lengths)
    again = blobs.put(records)
    assert sorted(again.tolist()[:-2]) == sorted(handles.tolist()[:-2])
    assert read_all(blobs, again, lengths) == records
    # and large records' own chunks are reused too, not piled up
    assert len(blobs.chunks) == len({h >> 32 for h in handles.tolist()})


def test_a_batch_of_one_size_class_takes_its_rows_without_sorting_by_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given an arena with rows freed, and numpy's sort by class refused
    blobs = Blobs()
    old = [b"%03d" % n + b"o" * 100 for n in range(30)]
    old_lengths = np.array([len(r) for r in old], np.int64)
    freed = blobs.put(old)

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("sorted by class")

    monkeypatch.setattr(np, "unique", refused)
    blobs.free(freed, old_lengths)
    # when a batch of records of that size class (sizes 97..112) is stored,
    # more than the rows freed
    records = [b"%02d" % n + b"r" * (95 + n % 16) for n in range(40)]
    lengths = np.array([len(r) for r in records], np.int64)
    handles = blobs.put(records)
    # then the freed rows are taken first, each record reads back byte for byte
    assert set(freed.tolist()) <= set(handles.tolist())
    assert len(set(handles.tolist())) == len(records)
    assert read_all(blobs, handles, lengths) == records
    # and freed, they are taken back by the next batch of the class
    blobs.free(handles, lengths)
    assert sorted(blobs.put(records).tolist()) == sorted(handles.tolist())


def read_all(blobs: Blobs, handles: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    pairs = zip(handles.tolist(), lengths.tolist(), strict=True)
    return [bytes(blobs.view(h, n)) for h, n in pairs]


# -- the time index -------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_the_time_index_gives_entries_back_in_time_order_across_windows(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time_index, "CHUNK", 7)  # pulled windows fed to near in pieces
    # given entries spread from milliseconds to years ahead, pushed while time moves
    rng = random.Random(seed)
    cols = Columns()
    lane = TimeIndex(0, cols)
    slots = cols.allocate(3_000)
    cols.state[slots] = LIVE
    now = rng.randrange(1 << 41)
    expected: list[tuple[int, int]] = []
    taken: list[tuple[int, int]] = []
    for slot in slots.tolist():
        ts = now + rng.choice((0, 5, *(1 << b for b in LEVEL_BITS), 1 << 35)) * rng.random()
        cols.timestamp[slot] = int(ts)
        lane.push(int(ts), slot)
        expected.append((int(ts), slot))
        if rng.random() < 0.1:
            # when time moves and everything due is popped
            now += rng.choice((1, *(1 << b for b in LEVEL_BITS), 1 << 30))
            lane.advance(now)
            first = lane.first()
            lane.top_up()
            while lane.near and lane.near[0] >> 32 <= now:
                key = heapq.heappop(lane.near)
                taken.append((key >> 32, key & 0xFFFFFFFF))
                lane.top_up()
            assert first is None or first == min(expected)[0]
            expected = [e for e in expected if e[0] > now]
            assert lane.first() == (min(expected)[0] if expected else None)
    # then they came out in time order, each once
    assert taken == sorted(taken)
    assert len(set(taken)) == len(taken)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ranks", [False, True], ids=["times", "ranks"])
def test_the_first_key_names_a_current_message_at_the_earliest_time(seed: int, ranks: bool) -> None:
    # given batches of entries over four buckets (negative ones: an index of
    # ranks), ties included, in the windows and, once pulled, in near
    rng = random.Random(seed)
    cols = Columns()
    lanes = [TimeIndex(b, cols, all_due=ranks) for b in range(4)]
    slots = cols.allocate(2_000)
    assert slots.tolist() == list(range(2_000))
    cols.state[slots] = LIVE
    sign = -1 if ranks else 1
    stamps = [sign * (1 << 40) + rng.randrange(1 << 22) // 1024 * 1024 for _ in range(2_000)]
    buckets = [rng.randrange(4) for _ in range(2_000)]
    cols.timestamp[slots] = stamps
    cols.bucket[slots] = buckets
    for part in np.array_split(np.arange(2_000), 5):
        push_all(lanes, np.array(buckets)[part], np.array(stamps)[part], slots[part])
    for step in range(30):
        for b, lane in enumerate(lanes):
            live = [
                (t, s) for s, (t, k) in enumerate(zip(stamps, buckets, strict=True)) if k == b and t
            ]
            key = lane.first_key()
            # then it is a current entry at the earliest time of its bucket
            assert key is not None and live
            slot, at = key & SLOT_MASK, key >> 32
            assert at == min(live)[0] and (at, slot) in live
            # when that message leaves (its stamp zeroed), or time moves on
            cols.timestamp[slot] = stamps[slot] = 0
            lane.touch(at)
            if step % 7 == 3 and ranks:
                lane.fill()
            elif step % 7 == 3:
                lane.advance(at + rng.randrange(1 << 16))


# -- a lease's fates ------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_a_lease_skips_the_rules_only_when_every_message_is_kept(seed: int) -> None:
    # given batches of messages with and without limits, expiries and deliveries
    rng = random.Random(seed)
    now = 1_800_000_000_000
    for _ in range(300):
        n = rng.randint(1, 6)
        cols = Columns()
        slots = cols.allocate(n)
        cols.deliveries[slots] = [rng.choice([0, 1, 2, 5]) for _ in range(n)]
        cols.max_deliveries[slots] = [rng.choice([0, 0, 0, 1, 2, 3]) for _ in range(n)]
        cols.expires_at[slots] = [rng.choice([0, 0, 0, now - 1, now + 2]) for _ in range(n)]
        topic_max = rng.choice([0, 0, 1, 3])
        dues = [now + rng.randint(-5, 5) for _ in range(n)]
        # when the lease judges them, it agrees with the rules message by message
        expected = [
            lease_fate(d, own, topic_max, exp, max(now, due))
            for d, own, exp, due in zip(
                cols.deliveries[slots].tolist(),
                cols.max_deliveries[slots].tolist(),
                cols.expires_at[slots].tolist(),
                dues,
                strict=True,
            )
        ]
        got = _fates(cols, slots, dues, topic_max, now)
        assert (got if got is not None else [Fate.KEEP] * n) == expected
