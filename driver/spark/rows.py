"""Arrow batches of DataFrame rows -> columns of messages to produce, and the
rows refused on the way (with their reason).

Spark hands each task its partition as Arrow record batches; every check and
conversion here works a column at a time, and only a batch that has bad rows
is looked at row by row. What the broker checks itself (time range, id length
and characters, payload against the topic's limit) is left to it, so each rule
is stated once; refused there, a row comes back as a rejection all the same.
Checked here is what the broker cannot see: nulls, a missing id, a topic that
does not exist, a payload too big for any frame; and what the driver refuses
before sending (a whole frame): a time in seconds, a bad key or headers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dejaq.core.due_time import EARLIEST
from dejaq.core.errors import InvalidArgument
from dejaq.core.headers import check_headers
from dejaq.core.keys import check_key
from dejaq.core.model import MAX_PAYLOAD_LIMIT
from dejaq.driver.spark.columns import Columns
from dejaq.driver.spark.ids import key_ids

I64 = npt.NDArray[np.int64]
_Refuse = Callable[["I64 | list[int]", str], None]  # rows, reason
# No topic takes a larger payload: such a row is refused here, alone, rather than
# sent in a frame the broker would refuse whole (over its produce frame cap).
MAX_PAYLOAD = MAX_PAYLOAD_LIMIT
_PER_MS = {"s": 0, "ms": 1, "us": 1000, "ns": 1_000_000}  # 0: multiply by 1000


@dataclass
class Messages:
    """A batch's good rows for one topic, a column per field."""

    topic: str
    rows: I64  # their positions in the source batch
    ids: list[str]
    timestamps: I64
    payloads: list[bytes]
    max_deliveries: list[int] | None = None
    expires_at: list[int] | None = None
    keys: list[str] | None = None  # "" = none
    headers: list[dict[str, str] | None] | None = None


@dataclass(frozen=True)
class Refusal:
    row: int  # position in the source batch
    reason: str
    id: str | None = None
    topic: str | None = None


@dataclass
class Prepared:
    messages: list[Messages] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


def topics_of(batch: pa.RecordBatch, c: Columns) -> set[str]:
    """The distinct topics a batch names in its topic column."""
    if c.topic is None:
        return set()
    return {t for t in pc.unique(batch.column(c.topic)).to_pylist() if t is not None}


def epoch_ms(column: pa.Array) -> tuple[I64, I64]:
    """Epoch ms of an integer (already ms) or timestamp column; and its null rows."""
    nulls = np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))
    if pa.types.is_timestamp(column.type):
        per_ms = _PER_MS[column.type.unit]
        raw = pc.fill_null(pc.cast(column, pa.int64()), 0).to_numpy().astype(np.int64)
        values = raw * 1000 if per_ms == 0 else raw // per_ms
    else:
        values = pc.fill_null(pc.cast(column, pa.int64()), 0).to_numpy().astype(np.int64)
    return values, nulls


def prepare(
    batch: pa.RecordBatch, c: Columns, topic: str | None, unknown: Collection[str] = ()
) -> Prepared:
    """The messages of ``batch`` by topic (``topic``, or each row's topic column),
    and its refused rows; ``unknown`` are topic names that do not exist."""
    n = batch.num_rows
    why: dict[int, str] = {}

    def refuse(rows: I64 | list[int], reason: str) -> None:
        for r in rows.tolist() if isinstance(rows, np.ndarray) else rows:
            why.setdefault(int(r), reason)

    ids = _ids(batch, c, refuse)
    timestamps, null_times = epoch_ms(batch.column(c.time))
    refuse(null_times, f"time ({c.time}) is null")
    # The driver refuses a frame holding one (seconds, not ms): refused here alone.
    refuse(
        np.flatnonzero((timestamps > 0) & (timestamps < EARLIEST)),
        f"time ({c.time}) is before 2001-09-09 in epoch ms: give epoch milliseconds, not seconds",
    )
    payload_column = batch.column(c.payload)
    if not pa.types.is_binary(payload_column.type):
        payload_column = pc.cast(payload_column, pa.binary())
    sizes = pc.fill_null(pc.binary_length(payload_column), 0).to_numpy()
    refuse(
        np.flatnonzero(sizes > MAX_PAYLOAD),
        f"payload is over {MAX_PAYLOAD} bytes (the most any topic takes)",
    )
    topics: list[str | None] | None = None
    if c.topic is not None:
        topics = batch.column(c.topic).to_pylist()
        refuse([i for i, t in enumerate(topics) if t is None], f"topic ({c.topic}) is null")
        for name in unknown:
            refuse([i for i, t in enumerate(topics) if t == name], f"unknown topic {name!r}")
    max_deliveries = _max_deliveries(batch, c, refuse)
    expires: I64 | None = None
    if c.expires_at is not None:
        expires, _ = epoch_ms(batch.column(c.expires_at))  # null: never
    keys = _keys(batch, c, refuse)
    headers = _headers(batch, c, refuse)

    out = Prepared()
    good = np.arange(n, dtype=np.int64)
    if why:
        good = np.array([i for i in range(n) if i not in why], np.int64)
        out.refused = [
            Refusal(r, reason, ids[r], topics[r] if topics else topic)
            for r, reason in sorted(why.items())
        ]
    groups: dict[str, I64] = {}
    if topics is None:
        assert topic is not None, "a topic option or column is resolved first"
        groups[topic] = good
    else:
        names = np.array(topics, dtype=object)[good]
        for name in sorted(set(names.tolist())):
            groups[name] = good[names == name]
    payloads = payload_column.to_pylist()
    for name, rows in groups.items():
        if not len(rows):
            continue
        picked = rows.tolist()
        out.messages.append(
            Messages(
                name,
                rows,
                [ids[i] for i in picked],  # type: ignore[misc]  # good rows have ids
                timestamps[rows],
                [payloads[i] or b"" for i in picked],
                [max_deliveries[i] for i in picked] if max_deliveries is not None else None,
                expires[rows].tolist() if expires is not None else None,
                [keys[i] for i in picked] if keys is not None else None,
                [headers[i] for i in picked] if headers is not None else None,
            )
        )
    return out


def _ids(batch: pa.RecordBatch, c: Columns, refuse: _Refuse) -> list[str | None]:
    n = batch.num_rows
    ids: list[str | None] = batch.column(c.id).to_pylist() if c.id else [None] * n
    missing = [i for i, v in enumerate(ids) if not v]
    if not missing:
        return ids
    if not c.keys:
        refuse(missing, "no id (null or empty) and no keyColumns to derive one from")
        return ids
    derived = key_ids(batch.take(pa.array(missing, pa.int64())), c.keys)
    for i, d in zip(missing, derived, strict=True):
        ids[i] = d
    refuse(
        [i for i, d in zip(missing, derived, strict=True) if d is None], "no id and all keys null"
    )
    return ids


def _max_deliveries(batch: pa.RecordBatch, c: Columns, refuse: _Refuse) -> list[int] | None:
    if c.max_deliveries is None:
        return None
    values = pc.fill_null(pc.cast(batch.column(c.max_deliveries), pa.int64()), 0).to_numpy()
    refuse(
        np.flatnonzero((values < 0) | (values > 0xFFFFFFFF)),
        f"max deliveries ({c.max_deliveries}) is outside 0 .. {0xFFFFFFFF}",
    )
    out: list[int] = np.clip(values, 0, 0xFFFFFFFF).tolist()
    return out


def _keys(batch: pa.RecordBatch, c: Columns, refuse: _Refuse) -> list[str] | None:
    """Each row's message key ("" for null or empty); a bad one refuses its row."""
    if c.message_key is None:
        return None
    out: list[str] = []
    for i, value in enumerate(batch.column(c.message_key).to_pylist()):
        key = value or ""
        if key:
            try:
                check_key(key)
            except InvalidArgument as exc:
                refuse([i], f"key ({c.message_key}): {exc}")
                key = ""
        out.append(key)
    return out


def _headers(
    batch: pa.RecordBatch, c: Columns, refuse: _Refuse
) -> list[dict[str, str] | None] | None:
    """Each row's headers (None for null or none); bad ones refuse their row."""
    if c.headers is None:
        return None
    out: list[dict[str, str] | None] = []
    for i, value in enumerate(batch.column(c.headers).to_pylist()):
        found = None
        if value is not None:
            try:
                found = check_headers(_header_map(value)) or None
            except InvalidArgument as exc:
                refuse([i], f"headers ({c.headers}): {exc}")
        out.append(found)
    return out


def _header_map(value: str | Iterable[tuple[Any, Any]]) -> dict[str, str]:
    """A row's headers as a dict: a map's (name, value) pairs, or a string
    holding a JSON object of strings (as a CSV gives them; blank: none)."""
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            doc = json.loads(value)
        except ValueError as exc:
            raise InvalidArgument(f"not a JSON object of strings: {exc}") from None
        if not isinstance(doc, dict):
            raise InvalidArgument("not a JSON object of strings")
        value = doc.items()
    out: dict[str, str] = {}
    for name, text in value:
        if not isinstance(text, str):
            raise InvalidArgument(
                f"header {name!r} is {'null' if text is None else 'not a string'}"
            )
        out[name] = text
    return out
