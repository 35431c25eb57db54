"""The consumer's ready deliveries go round the keys, each key's in order."""

from __future__ import annotations

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
