"""sql_base.FairShare: a pass's limit shared among keys step by step, as the
SQL backends run it (the conformance stories check the passes themselves)."""

from __future__ import annotations

from dejaq.storage_plugins.sql_base import FairShare


def run(share: FairShare, due: dict[str, int]) -> dict[str, int]:
    """Drive ``share`` over keys holding ``due`` messages each; what each took."""
    left = dict(due)
    while allotment := share.allot():
        for key, asked in allotment.items():
            got = min(asked, left[key])
            left[key] -= got
            share.took(key, asked, got, got)
    return share.taken


def test_what_a_key_leaves_goes_to_the_others_and_the_remainder_to_the_earliest() -> None:
    # given keys due earliest first c, b, "" with 30, 5 and 1 messages
    share = FairShare.of(6, {"c": 1, "b": 2, "": 2}, None)
    # then 2 each, and the one "" leaves goes to c, the earliest
    assert run(share, {"c": 30, "b": 5, "": 1}) == {"c": 3, "b": 2, "": 1}


def test_with_more_keys_than_the_limit_the_earliest_take_one_each() -> None:
    share = FairShare.of(3, {f"k{i}": 100 - i for i in range(10)}, None)
    assert run(share, {f"k{i}": 5 for i in range(10)}) == {"k9": 1, "k8": 1, "k7": 1}


def test_a_cap_bounds_a_key_and_a_cap_of_zero_leaves_it_out() -> None:
    share = FairShare.of(20, {"c": 1, "d": 2, "e": 3}, {"c": 2, "e": 0})
    assert share.active == ["c", "d"]
    assert run(share, {"c": 40, "d": 40, "e": 40}) == {"c": 2, "d": 18}


def test_dead_letters_use_up_no_part_of_the_limit() -> None:
    # given a key whose first 3 rows read die instead of being delivered
    share = FairShare.of(4, {"a": 1}, None)
    assert share.allot() == {"a": 4}
    share.took("a", 4, 4, 1)
    # then the key stays in for what is left of the limit
    assert share.allot() == {"a": 3}
    share.took("a", 3, 2, 2)
    assert share.allot() == {}
    assert share.taken == {"a": 3}
