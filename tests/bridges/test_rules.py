"""A bridge's rule reads a source message's due time, id, key, priority and
headers; what it cannot read says why, for the dead timeline."""

from __future__ import annotations

import pytest

from dejaq.bridges import rules
from dejaq.bridges.endpoints import Inbound
from dejaq.bridges.rules import DueRule, FieldRule, Rules, Unreadable

NOW = 1_800_000_000_000


def message(**fields: str) -> Inbound:
    return Inbound(b"body", fields, "1700000000000-0", "1700000000000-0")


def test_the_due_field_as_epoch_ms_or_iso_or_a_delay() -> None:
    by_ms = Rules(DueRule("due_ms"))
    assert rules.outgoing(by_ms, message(due_ms="1800000000500"), NOW).timestamp_ms == NOW + 500
    by_iso = Rules(DueRule("at", "iso"))
    at = rules.outgoing(by_iso, message(at="2027-01-15T08:00:00.250Z"), NOW).timestamp_ms
    assert at == NOW + 250
    naive = rules.outgoing(by_iso, message(at="2027-01-15T08:00:00.250"), NOW).timestamp_ms
    assert naive == at  # an ISO time without an offset is UTC
    fixed = Rules(DueRule(None, delay=5000))
    assert rules.outgoing(fixed, message(due_ms="1"), NOW).timestamp_ms == NOW + 5000
    fallback = Rules(DueRule("due_ms", delay=1000))
    assert rules.outgoing(fallback, message(), NOW).timestamp_ms == NOW + 1000
    assert rules.outgoing(fallback, message(due_ms=str(NOW + 7)), NOW).timestamp_ms == NOW + 7


def test_the_id_key_priority_and_headers() -> None:
    rule = Rules(
        DueRule(None, delay=0),
        id=FieldRule("id"),
        key=FieldRule("user"),
        priority=FieldRule("p"),
        headers=("trace", "user"),
    )
    out = rules.outgoing(rule, message(id="order-7", user="ann", p="3", trace="t1", x="y"), NOW)
    assert (out.id, out.key, out.priority, out.payload) == ("order-7", "ann", 3, b"body")
    assert out.headers == {"trace": "t1", "user": "ann"}
    # Without an id rule the source's own id; without headers named, every field
    plain = rules.outgoing(Rules(DueRule(None, delay=0)), message(a="1"), NOW)
    assert (plain.id, plain.key, plain.priority, plain.headers) == (
        "1700000000000-0",
        "",
        0,
        {"a": "1"},
    )


@pytest.mark.parametrize(
    ("rule", "fields", "says"),
    [
        (Rules(DueRule("due_ms")), {}, "no due field 'due_ms'"),
        (Rules(DueRule("due_ms")), {"due_ms": "soon"}, "is not epoch milliseconds"),
        (Rules(DueRule("due_ms")), {"due_ms": "1800000000"}, "give epoch milliseconds"),
        (Rules(DueRule("at", "iso")), {"at": "tuesday"}, "is not an ISO 8601 time"),
        (Rules(DueRule(None, delay=0), id=FieldRule("id")), {}, "no id field 'id'"),
        (Rules(DueRule(None, delay=0), priority=FieldRule("p")), {"p": "high"}, "whole number"),
    ],
)
def test_what_the_rule_cannot_read_says_why(rule: Rules, fields: dict[str, str], says: str) -> None:
    with pytest.raises(Unreadable, match=says):
        rules.outgoing(rule, message(**fields), NOW)


def test_headers_the_producer_would_refuse_are_found() -> None:
    out = rules.outgoing(Rules(DueRule(None, delay=0)), message(**{"bad name": "x"}), NOW)
    with pytest.raises(Unreadable, match="headers:"):
        rules.check(out)
    rules.check(rules.outgoing(Rules(DueRule(None, delay=0)), message(good="x"), NOW))


def test_a_dead_message_is_due_now_expired_and_carries_its_reason() -> None:
    out = rules.dead(message(), "no due field 'due_ms'\n", NOW)
    assert (out.id, out.timestamp_ms, out.expires_at_ms) == ("1700000000000-0", NOW, NOW)
    assert out.headers == {
        rules.ERROR_HEADER: "no due field 'due_ms' ",
        rules.SOURCE_ID_HEADER: "1700000000000-0",
    }


def test_a_batch_as_columns_is_what_each_message_makes_the_unreadable_set_apart() -> None:
    # Given a keyed priority rule and a batch with one message it cannot read
    rule = Rules(
        DueRule("due_ms"), id=FieldRule("id"), key=FieldRule("user"), priority=FieldRule("p")
    )
    batch = [
        message(due_ms=str(NOW + 5), id="a", user="ann", p="2", trace="t"),
        message(id="b", user="bob"),
        message(due_ms=str(NOW + 1), id="c", user="cy", p="0"),
    ]
    # When the batch is made columns
    columns, bad = rules.columns(rule, batch, NOW)
    # Then each readable one is what outgoing makes of it, and the other says why
    readable = [batch[0], batch[2]]
    assert columns.messages == readable
    assert [columns.outgoing(i) for i in range(len(columns))] == [
        rules.outgoing(rule, m, NOW) for m in readable
    ]
    assert bad == [(batch[1], "no due field 'due_ms'")]


def test_columns_no_message_fills_are_left_out() -> None:
    columns, bad = rules.columns(Rules(DueRule(None, delay=0)), [Inbound(b"x", {}, "1-0")], NOW)
    assert bad == [] and columns.ids == ["1-0"] and columns.timestamps == [NOW]
    assert (columns.keys, columns.priorities, columns.headers) == (None, None, None)
