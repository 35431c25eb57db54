"""A lease pass's deliveries as columns: read as a sequence of ``LeasedMessage``
where a caller wants one, sliced, joined and put in due order by column."""

from __future__ import annotations

from dejaq.core.deliveries import Deliveries, columns
from dejaq.core.model import LeasedMessage

A = LeasedMessage("a", 30, b"pa", 2, 1)
B = LeasedMessage("b", 10, b"pb", 3, 2, 4, "tenant", b"h")
C = LeasedMessage("c", 30, b"pc", 5, 1)


def test_columns_read_back_as_the_messages_they_were_made_of() -> None:
    # given three messages, one with a priority, a key and headers
    given = [A, B, C]
    # when made columns
    d = columns(given)
    # then each reads back as it was, by index, slice and iteration
    assert d.ids == ["a", "b", "c"] and d.timestamps == [30, 10, 30]
    assert list(d) == given and d[1] == B and d[-1] == C
    assert list(d[1:]) == [B, C] and isinstance(d[1:], Deliveries)
    assert d == given and len(d) == 3
    # and columns are taken as they are
    assert columns(d) is d


def test_columns_without_keys_headers_or_priorities_read_as_none_of_them() -> None:
    # given columns that leave the optional ones out
    d = Deliveries(["a"], [30], [b"pa"], [2], [1])
    # then its message has priority 0, no key and no headers
    assert list(d) == [A]
    assert d[0] == A


def test_joined_parts_fill_the_optional_columns_of_the_parts_without_them() -> None:
    # given one part without keys and headers, and one with them
    plain = Deliveries(["a"], [30], [b"pa"], [2], [1])
    keyed = columns([B])
    # when joined
    d = Deliveries.joined([plain, keyed])
    # then every message reads as it was, the plain one with no key
    assert list(d) == [A, B]
    assert d.keys == ["", "tenant"] and d.headers == [b"", b"h"]
    # and one part alone is itself
    assert Deliveries.joined([keyed]) is keyed


def test_due_order_moves_messages_whole_and_keeps_equal_times_in_order() -> None:
    # given messages out of due order, two at the same time
    d = columns([A, B, C])
    # when put in due order
    ordered = d.in_due_order()
    # then the earlier comes first, equal times keep their order, fields travel along
    assert list(ordered) == [B, A, C]
    # and messages already in order are left as they are
    assert ordered.in_due_order() is ordered


def test_messages_picked_by_position_come_whole() -> None:
    d = columns([A, B, C])
    assert list(d.picked([2, 1])) == [C, B]
