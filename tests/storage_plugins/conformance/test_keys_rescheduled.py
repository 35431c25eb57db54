"""A keyed message put earlier (nacked, moved, released, handed back,
redriven) is due in its key at its new time, while another key's backlog is
due: a fair pass finds it there, not only once the backlog is gone."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    C1,
    NOW,
    T,
    given_messages,
    given_topic,
    ids,
    lease,
    msg,
)

AGAIN = NOW + 1  # when the message is due again


async def nacked(storage: Storage) -> None:
    (d,) = (await lease(storage, caps={"b": 0})).delivered
    await storage.nack(T, [(d.id, d.version)], C1, AGAIN, 0)


async def released(storage: Storage) -> None:
    await lease(storage, caps={"b": 0})
    assert await storage.release(T, C1, AGAIN) == 1


async def handed_back(storage: Storage) -> None:
    (d,) = (await lease(storage, caps={"b": 0})).delivered
    await storage.hand_back(T, [(d.id, d.version, AGAIN)], C1)


async def moved(storage: Storage) -> None:
    # a move of the message while it waits, from far ahead to now
    await storage.move(T, "m", 1, AGAIN, NOW)


async def redriven(storage: Storage) -> None:
    (d,) = (await lease(storage, caps={"b": 0})).delivered
    await storage.nack(T, [(d.id, d.version)], C1, NOW, 1)  # out of deliveries: dead
    assert await storage.redrive(T, None, AGAIN) == 1


WAYS: dict[str, Callable[[Storage], Awaitable[None]]] = {
    "nacked": nacked,
    "released": released,
    "handed-back": handed_back,
    "moved": moved,
    "redriven": redriven,
}


@pytest.mark.parametrize("way", list(WAYS))
async def test_a_keyed_message_put_earlier_is_due_in_its_key(storage: Storage, way: str) -> None:
    # given one message of key a (far ahead when it is to be moved) and a backlog of key b
    await given_topic(storage)
    due = NOW + 10_000 if way == "moved" else NOW
    await given_messages(storage, msg("m", due, bucket=1, key="a"))
    await given_messages(
        storage, *(msg(f"b{i:02}", NOW - 5, bucket=i % 4, key="b") for i in range(40))
    )
    # when m is put back due at AGAIN
    await WAYS[way](storage)
    # then a pass then takes it beside b's share
    assert "m" in ids(await lease(storage, AGAIN, limit=2, owner="c2"))
