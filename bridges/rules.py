"""A bridge's rule: when a source message is due, which id it takes, its key,
priority and headers. A message the rule cannot read is ``Unreadable``, with
the reason it goes to the dead timeline (or the error sink) with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dejaq.bridges.endpoints import Inbound
from dejaq.core import headers as header_codec
from dejaq.core.due_time import DUE_TIME
from dejaq.core.errors import InvalidArgument
from dejaq.core.keys import check_key
from dejaq.driver.producer import Outgoing

# The headers a message sent to the dead timeline carries: why, and whence.
ERROR_HEADER = "dejaq-bridge-error"
SOURCE_ID_HEADER = "dejaq-bridge-source-id"
MAX_REASON = 400  # characters of a reason kept in its header


@dataclass(frozen=True)
class DueRule:
    field: str | None  # the field holding the due time; None: every message by ``delay``
    format: str = "ms"  # "ms": epoch milliseconds; "iso": an ISO 8601 time (UTC if no offset)
    delay: int | None = None  # ms after the bridge read it; with a field, when the field is absent


@dataclass(frozen=True)
class FieldRule:
    field: str


@dataclass(frozen=True)
class Rules:
    due: DueRule
    id: FieldRule | None = None  # None: the source's own id
    key: FieldRule | None = None
    priority: FieldRule | None = None
    headers: Sequence[str] | None = None  # the fields carried as headers; None: all


class Unreadable(ValueError):
    """The rule cannot read this message: ``str()`` says why."""


def outgoing(rules: Rules, message: Inbound, now_ms: int) -> Outgoing:
    """The message to produce for ``message`` (``Unreadable`` when the rule fails)."""
    fields = message.fields
    return Outgoing(
        message.payload,
        due_ms(rules.due, fields, now_ms),
        _id(rules.id, message),
        priority=_priority(rules.priority, fields),
        key=_key(rules.key, fields),
        headers=_headers(rules.headers, fields),
    )


@dataclass
class Columns:
    """The messages of a batch the rule could read, a column each, as the
    producer's ``send_columns`` takes them: no ``Outgoing`` a message. A
    column no message fills stays None."""

    messages: list[Inbound] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    priorities: list[int] | None = None
    keys: list[str] | None = None
    headers: list[dict[str, str] | None] | None = None

    def __len__(self) -> int:
        return len(self.messages)

    def outgoing(self, i: int) -> Outgoing:
        """The ``i``-th message as an ``Outgoing``."""
        return Outgoing(
            self.payloads[i],
            self.timestamps[i],
            self.ids[i],
            priority=0 if self.priorities is None else self.priorities[i],
            key="" if self.keys is None else self.keys[i],
            headers=None if self.headers is None else self.headers[i],
        )


def columns(
    rules: Rules, taken: Sequence[Inbound], now_ms: int
) -> tuple[Columns, list[tuple[Inbound, str]]]:
    """What ``outgoing`` makes of each of ``taken``, as columns; and those the
    rule cannot read, each with its reason."""
    out = Columns()
    bad: list[tuple[Inbound, str]] = []
    due_rule, id_rule, key_rule = rules.due, rules.id, rules.key
    priority_rule, names = rules.priority, rules.headers
    priorities: list[int] = []
    keys: list[str] = []
    headers: list[dict[str, str] | None] = []
    for message in taken:
        fields = message.fields
        try:
            row = (
                due_ms(due_rule, fields, now_ms),
                _id(id_rule, message),
                _priority(priority_rule, fields),
                _key(key_rule, fields),
            )
        except Unreadable as exc:
            bad.append((message, str(exc)))
            continue
        out.messages.append(message)
        out.timestamps.append(row[0])
        out.payloads.append(message.payload)
        out.ids.append(row[1])
        priorities.append(row[2])
        keys.append(row[3])
        headers.append(_headers(names, fields))
    if priority_rule is not None:
        out.priorities = priorities
    if key_rule is not None:
        out.keys = keys
    if any(headers):
        out.headers = headers
    return out, bad


def dead(message: Inbound, reason: str, now_ms: int) -> Outgoing:
    """``message`` for the topic's dead timeline: due now and expired already, so
    the lease pass moves it there rather than deliver it; by the source's id,
    with the reason in a header."""
    return Outgoing(
        message.payload,
        now_ms,
        message.source_id,
        expires_at_ms=now_ms,
        headers={
            ERROR_HEADER: _printable(reason)[:MAX_REASON],
            SOURCE_ID_HEADER: message.source_id,
        },
    )


def due_ms(rule: DueRule, fields: Mapping[str, str], now_ms: int) -> int:
    raw = fields.get(rule.field) if rule.field is not None else None
    if raw is None:
        if rule.delay is None:
            raise Unreadable(f"no due field {rule.field!r}")
        return now_ms + rule.delay
    at = _iso_ms(raw, rule.field) if rule.format == "iso" else _epoch_ms(raw, rule.field)
    error = DUE_TIME.error(at)
    if error is not None:
        raise Unreadable(f"due field {rule.field!r}: {error}")
    return at


def _epoch_ms(raw: str, name: str | None) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise Unreadable(f"due field {name!r}: {raw[:40]!r} is not epoch milliseconds") from None


def _iso_ms(raw: str, name: str | None) -> int:
    try:
        at = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise Unreadable(f"due field {name!r}: {raw[:40]!r} is not an ISO 8601 time") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return int(at.timestamp() * 1000)


def _id(rule: FieldRule | None, message: Inbound) -> str:
    if rule is None:
        return message.source_id
    found = message.fields.get(rule.field)
    if not found:
        raise Unreadable(f"no id field {rule.field!r}")
    return found


def _key(rule: FieldRule | None, fields: Mapping[str, str]) -> str:
    if rule is None:
        return ""
    found = fields.get(rule.field, "")
    try:
        return check_key(found)
    except InvalidArgument as exc:
        raise Unreadable(f"key field {rule.field!r}: {exc}") from None


def _priority(rule: FieldRule | None, fields: Mapping[str, str]) -> int:
    if rule is None or rule.field not in fields:
        return 0
    raw = fields[rule.field]
    try:
        value = int(raw.strip())
    except ValueError:
        raise Unreadable(
            f"priority field {rule.field!r}: {raw[:40]!r} is not a whole number"
        ) from None
    if value < 0:
        raise Unreadable(f"priority field {rule.field!r}: {value} is below 0")
    return value


def _headers(names: Sequence[str] | None, fields: Mapping[str, str]) -> dict[str, str] | None:
    """The fields carried as headers, unchecked: the producer checks a batch's
    headers as it encodes them, and ``check`` finds the bad ones when it refuses."""
    carried = dict(fields) if names is None else {n: fields[n] for n in names if n in fields}
    return carried or None


def check(message: Outgoing) -> None:
    """``Unreadable`` when the producer would refuse ``message``'s headers."""
    if message.headers:
        try:
            header_codec.check_headers(message.headers)
        except InvalidArgument as exc:
            raise Unreadable(f"headers: {exc}") from None


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text)
