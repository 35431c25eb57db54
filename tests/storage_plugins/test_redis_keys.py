"""The hash tags of a topic's slots on ``redis://`` and ``redis+cluster://``:
slot ``i`` of ``n`` lands in the ``i``-th of ``n`` equal ranges of Redis
Cluster's hash slots, so a topic spreads evenly over masters that share them."""

from __future__ import annotations

import itertools
import random
import string

import pytest
from redis.crc import key_slot

from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis.keys import Slot, hash_range


@pytest.mark.parametrize("slots", [1, 2, 3, 6, 8, 12, 16, 64])
def test_each_slot_of_many_random_topics_lands_in_its_range(slots: int) -> None:
    rng = random.Random(slots)
    alphabet = string.ascii_letters + string.digits + "._-"
    for _ in range(300):
        topic = "".join(rng.choices(alphabet, k=rng.randint(1, 40)))
        for index in range(slots):
            lo, hi = hash_range(index, slots)
            s = Slot(topic, index, slots)
            assert lo <= key_slot(s.records.encode()) < hi, (topic, index, s.prefix)
            assert key_slot(s.timeline(3).encode()) == key_slot(s.alive.encode())


def test_the_ranges_cover_the_hash_slots_and_meet_the_masters_of_a_created_cluster() -> None:
    # redis-cli --cluster create gives 3 masters 0-5460, 5461-10922, 10923-16383
    assert [hash_range(i, 3) for i in range(3)] == [(0, 5461), (5461, 10923), (10923, 16384)]
    for slots in (5, 6, 7, 12):
        bounds = [hash_range(i, slots) for i in range(slots)]
        assert bounds[0][0] == 0 and bounds[-1][1] == redis_keys.HASH_SLOTS
        assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    assert {hash_range(2 * i, 6)[0] for i in range(3)} == {0, 5461, 10923}


def test_a_tag_is_plain_when_it_lands_in_its_range_and_suffixed_only_when_not() -> None:
    for topic in ("orders", "emails", "a"):
        for index, tag in enumerate(redis_keys.tags(topic, 8)):
            lo, hi = hash_range(index, 8)
            plain = f"{topic}:{index}"
            if lo <= key_slot(plain.encode()) < hi:
                assert tag == plain
            else:
                k = int(tag.removeprefix(plain + ":"))
                assert all(not lo <= key_slot(f"{plain}:{j}".encode()) < hi for j in range(1, k))


def test_one_slot_keeps_the_plain_tag_and_the_first_layout_s_tag_is_kept_apart() -> None:
    assert Slot("orders", 0, 1).prefix == "dejaq:{orders:0}:"
    assert Slot.format1("orders", 3, 8).prefix == "dejaq:{orders:3}:"
    assert Slot("orders", 3, 8).prefix == "dejaq:{" + redis_keys.tags("orders", 8)[3] + "}:"


def test_a_topic_name_redis_cuts_short_keeps_its_plain_tags() -> None:
    # a '}' in the name ends the hash tag there: no suffix moves it
    assert redis_keys.tags("a}b", 4) == ("a}b:0", "a}b:1", "a}b:2", "a}b:3")
