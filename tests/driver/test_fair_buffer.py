"""The consumer's ready deliveries go round the keys, each key's in order."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from dejaq.driver.fair_buffer import FairBuffer


@dataclass
class D:
    key: str
    n: int


def test_a_reminder_behind_a_campaign_goes_next() -> None:
    # given 2,000 deliveries of one campaign ready, then one reminder
    buffer: FairBuffer[D] = FairBuffer()
    buffer.extend(D("campaign", i) for i in range(2000))
    buffer.extend([D("user-7", 0)])
    # when the application takes two, then the reminder is the second
    assert [buffer.popleft().key for _ in range(2)] == ["campaign", "user-7"]
    assert len(buffer) == 1999


def test_keys_take_turns_and_each_keeps_its_order() -> None:
    buffer: FairBuffer[D] = FairBuffer()
    buffer.extend([D("a", 0), D("a", 1), D("a", 2), D("b", 0), D("", 0), D("b", 1)])
    taken = buffer.drain()
    assert [(d.key, d.n) for d in taken] == [
        ("a", 0),
        ("b", 0),
        ("", 0),
        ("a", 1),
        ("b", 1),
        ("a", 2),
    ]
    assert not buffer and len(buffer) == 0


def test_a_key_that_empties_rejoins_at_the_back() -> None:
    buffer: FairBuffer[D] = FairBuffer()
    buffer.extend([D("a", 0), D("b", 0), D("b", 1)])
    assert buffer.popleft().key == "a"
    buffer.extend([D("a", 1)])
    assert [(d.key, d.n) for d in buffer.drain()] == [("b", 0), ("a", 1), ("b", 1)]


def test_without_keys_it_is_a_fifo() -> None:
    buffer: FairBuffer[D] = FairBuffer()
    buffer.extend(D("", i) for i in range(5))
    assert [buffer.popleft().n for _ in range(5)] == [0, 1, 2, 3, 4]
    buffer.extend([D("", 9)])
    buffer.clear()
    assert len(buffer) == 0


def test_deliveries_of_distinct_new_keys_go_in_turn_with_the_keys_before_them() -> None:
    # given two deliveries of key "a" ready, then a stretch of three new keys
    buffer: FairBuffer[D] = FairBuffer()
    buffer.extend([D("a", 0), D("a", 1)])
    buffer.add_keyed([D("x", 0), D("y", 0), D("z", 0)], ["x", "y", "z"])
    # when every one is taken, then each new key had its turn after "a"'s first
    assert [(d.key, d.n) for d in buffer.drain()] == [
        ("a", 0),
        ("x", 0),
        ("y", 0),
        ("z", 0),
        ("a", 1),
    ]


def test_a_delivery_of_a_key_waiting_in_a_stretch_waits_behind_its_key() -> None:
    # given a stretch of keys x, y, z whose first was taken, then more of y and of w
    buffer: FairBuffer[D] = FairBuffer()
    buffer.add_keyed([D("x", 0), D("y", 0), D("z", 0)], ["x", "y", "z"])
    assert buffer.popleft().key == "x"
    buffer.add_keyed([D("y", 1), D("w", 0)], ["y", "w"])
    # when the rest is taken, then y's second comes after every other key's turn
    assert [(d.key, d.n) for d in buffer.drain()] == [("y", 0), ("z", 0), ("w", 0), ("y", 1)]


class Reference:
    """The rule the buffer keeps, stated plainly: a queue a key, a ring of keys."""

    def __init__(self) -> None:
        self.queues: dict[str, deque[D]] = {}
        self.ring: deque[str] = deque()

    def add(self, items: list[D]) -> None:
        for d in items:
            if d.key not in self.queues:
                self.queues[d.key] = deque()
                self.ring.append(d.key)
            self.queues[d.key].append(d)

    def pop(self) -> D:
        key = self.ring.popleft()
        d = self.queues[key].popleft()
        if self.queues[key]:
            self.ring.append(key)
        else:
            del self.queues[key]
        return d


def test_any_mix_of_additions_hands_out_what_a_queue_a_key_would() -> None:
    # given a seeded mix of stretches (keyed, of one key, delivery by delivery)
    # over few keys, so that they meet, and takes of one or of a batch
    rng = random.Random(7)
    buffer: FairBuffer[D] = FairBuffer()
    reference = Reference()
    n = 0
    for _ in range(3000):
        what = rng.random()
        if what < 0.55:
            size = rng.randint(1, 6)
            distinct = rng.random() < 0.7
            pool = [f"k{j}" for j in range(12)] + [""]
            keys = rng.sample(pool, size) if distinct else rng.choices(pool, k=size)
            items = [D(k, n + j) for j, k in enumerate(keys)]
            n += size
            reference.add(items)
            # when they join as a stretch of keys, one key's run, or one by one
            how = rng.random()
            if how < 0.6:
                buffer.add_keyed(items, keys)
            elif how < 0.8:
                buffer.extend(items)
            else:
                for d in items:
                    buffer.add_run(d.key, [d])
        elif what < 0.9 and buffer:
            # then each take is the reference's next
            assert buffer.popleft() == reference.pop()
        elif buffer:
            batch = list(buffer.take_batch())
            assert batch and batch == [reference.pop() for _ in batch]
        assert len(buffer) == sum(map(len, reference.queues.values()))
    assert buffer.drain() == [reference.pop() for _ in range(len(buffer))]
