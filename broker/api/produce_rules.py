"""What each message of a produce frame must meet, read from one list of
rules: its id (``validation.message_id_error``), its key and headers
(``extras``: core/keys.py, core/headers.py), then one bound per column
(timestamp, payload size, expiry, priority).

``all_valid`` checks a frame a column at a time, at C speed, for the common
frame where everything is valid; ``screen`` checks message by message and says
what is wrong with each refused one. Both read the same rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import grpc

from dejaq.broker.api import validation
from dejaq.core import headers as header_codec
from dejaq.core.bounds import Bound
from dejaq.core.errors import InvalidArgument, PayloadTooLarge
from dejaq.core.keys import ascii_keys_from_utf8, key_from_utf8
from dejaq.core.model import Topic
from dejaq.core.priority import priority_bound
from dejaq.core.wire.batches import ProduceBatch
from dejaq.core.wire.status import kind_of
from dejaq.proto import dejaq_pb2 as pb

_INVALID = grpc.StatusCode.INVALID_ARGUMENT.value[0]
_INVALID_KIND = kind_of(InvalidArgument(""))
_TOO_LARGE_KIND = kind_of(PayloadTooLarge(""))  # still INVALID_ARGUMENT; HTTP says 413


class Rule(NamedTuple):
    bound: Bound
    values: Sequence[int]  # the batch's column it applies to
    kind: str = _INVALID_KIND  # the kind of its refusals


def column_rules(batch: ProduceBatch, topic: Topic) -> list[Rule]:
    """Each bound a message meets, with the batch's column it applies to (a
    column the batch leaves out is all defaults, within every bound)."""
    rules = [
        Rule(validation.TIMESTAMP, batch.timestamps),
        Rule(
            validation.payload_bound(topic.settings),
            list(map(len, batch.payloads)),
            _TOO_LARGE_KIND,
        ),
    ]
    if batch.expires_at is not None:
        rules.append(Rule(validation.EXPIRY, batch.expires_at))
    if batch.priorities is not None:
        rules.append(Rule(priority_bound(topic), batch.priorities))
    return rules


class Extras(NamedTuple):
    """A frame's keys and headers as stored, and why a message's were refused."""

    keys: list[str] | None  # None: no message has a key
    headers: list[bytes] | None  # encoded; None: no message has any
    errors: dict[int, str]  # position -> why its key or headers are refused


_NO_EXTRAS = Extras(None, None, {})


def extras(batch: ProduceBatch) -> Extras:
    """Each message's key (UTF-8, within bounds) and headers (a map of strings
    within bounds), checked; a frame without either costs nothing."""
    if batch.keys is None and batch.headers is None:
        return _NO_EXTRAS
    errors: dict[int, str] = {}
    keys = None
    if batch.keys is not None:
        # The common column, every key ASCII and within bounds, in one pass.
        keys = ascii_keys_from_utf8(batch.keys)
    if batch.keys is not None and keys is None:
        keys = []
        for i, raw in enumerate(batch.keys):
            try:
                keys.append(key_from_utf8(raw) if raw else "")
            except InvalidArgument as exc:
                errors[i] = str(exc)
                keys.append("")
    headers = batch.headers
    if headers is not None:
        for i, raw in enumerate(headers):
            if not raw or i in errors:
                continue
            try:
                header_codec.from_wire(raw)
            except InvalidArgument as exc:
                errors[i] = str(exc)
    return Extras(keys, headers, errors)


def all_valid(batch: ProduceBatch, ids: list[str], topic: Topic) -> bool:
    """Whether every message is valid, checked a column at a time."""
    return validation.message_ids_valid(ids) and all(
        rule.bound.holds_for_all(rule.values) for rule in column_rules(batch, topic)
    )


def screen(
    batch: ProduceBatch,
    ids: list[str],
    topic: Topic,
    extra_errors: dict[int, str] | None = None,
) -> tuple[list[int], list[pb.Rejection]]:
    """Check message by message: the positions to insert and the rejections
    (``extra_errors``: those of keys and headers, from ``extras``)."""
    rules = column_rules(batch, topic)
    positions: list[int] = []
    rejections: list[pb.Rejection] = []
    extra_errors = extra_errors or {}
    for i, mid in enumerate(ids):
        err = validation.message_id_error(mid) or extra_errors.get(i)
        kind = _INVALID_KIND
        for rule in rules:
            if err is not None:
                break
            err, kind = rule.bound.error(rule.values[i]), rule.kind
        if err is not None:
            rejections.append(pb.Rejection(index=i, code=_INVALID, reason=err, kind=kind))
        else:
            positions.append(i)
    return positions, rejections
