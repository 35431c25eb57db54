"""Encode and decode the columnar FlatBuffers batches of fbs/batch.fbs.

Scalar columns go in and out as numpy arrays (one call per column, not per
message); ids and payloads travel as one blob plus an offsets vector each.
Decoding validates the shape of a frame and raises ``InvalidArgument`` for
anything malformed, so a bad frame never reaches storage.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import flatbuffers
import numpy as np
import numpy.typing as npt

from dejaq.core import priority as prio
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import KIND_PRIORITY, LeasedMessage, Topic
from dejaq.core.wire.frames import cuts, frame_bytes
from dejaq.fbs.batch import DeliveryBatch, MessageBatch, ProduceResults

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ProduceBatch:
    """A decoded MessageBatch. An empty id means "generate one"."""

    timestamps: list[int]
    ids: list[str]
    payloads: list[bytes]
    max_deliveries: list[int] | None = None
    expires_at: list[int] | None = None
    priorities: list[int] | None = None  # None = every message 0

    def __len__(self) -> int:
        return len(self.timestamps)


def _offsets(items: Sequence[bytes]) -> npt.NDArray[np.uint32]:
    offsets = np.zeros(len(items) + 1, dtype=np.uint32)
    if items:
        np.cumsum(np.fromiter(map(len, items), np.uint32, len(items)), out=offsets[1:])
    return offsets


def _blob_column(builder: flatbuffers.Builder, items: Sequence[bytes]) -> tuple[int, int]:
    offsets = builder.CreateNumpyVector(_offsets(items))
    blob = builder.CreateByteVector(b"".join(items))
    return offsets, blob


def _bounds(size: int, offsets: Any, count: int, what: str) -> list[int]:
    """The checked offsets vector of a blob of ``size`` bytes, as a list."""
    if not isinstance(offsets, np.ndarray) or len(offsets) != count + 1:
        raise InvalidArgument(f"malformed batch: {what} offsets do not match the message count")
    o = offsets.astype(np.int64)
    if o[0] != 0 or o[-1] != size or bool(np.any(np.diff(o) < 0)):
        raise InvalidArgument(f"malformed batch: {what} offsets are out of order or out of range")
    return list(o.tolist())


def _split(blob: bytes, offsets: Any, count: int, what: str) -> list[bytes]:
    """Slice a blob by its offsets vector, checking every bound first."""
    if count == 0:
        return []
    b = _bounds(len(blob), offsets, count, what)
    return [blob[b[i] : b[i + 1]] for i in range(count)]


def _split_text(blob: bytes, offsets: Any, count: int, what: str) -> list[str]:
    """Like ``_split`` for UTF-8 strings; an ASCII blob decodes in one call."""
    if count == 0:
        return []
    b = _bounds(len(blob), offsets, count, what)
    text = blob.decode()
    if len(text) == len(blob):  # ASCII: byte offsets are character offsets
        return [text[b[i] : b[i + 1]] for i in range(count)]
    return [blob[b[i] : b[i + 1]].decode() for i in range(count)]


def _text_column(builder: flatbuffers.Builder, items: Sequence[str]) -> tuple[int, int]:
    """Strings as one UTF-8 blob plus offsets; ASCII strings encode in one call."""
    joined = "".join(items)
    blob = joined.encode()
    if len(blob) == len(joined):
        offsets = np.zeros(len(items) + 1, dtype=np.uint32)
        if items:
            np.cumsum(np.fromiter(map(len, items), np.uint32, len(items)), out=offsets[1:])
        return builder.CreateNumpyVector(offsets), builder.CreateByteVector(blob)
    return _blob_column(builder, [i.encode() for i in items])


def _column(value: Any, count: int, what: str) -> list[int] | None:
    if not isinstance(value, np.ndarray) or len(value) == 0:
        return None
    if len(value) != count:
        raise InvalidArgument(f"malformed batch: {what} has {len(value)} entries for {count}")
    return list(value.tolist())


def encode_messages(
    timestamps: Sequence[int] | I64,
    payloads: Sequence[bytes],
    ids: Sequence[str] | None = None,
    max_deliveries: Sequence[int] | None = None,
    expires_at: Sequence[int] | None = None,
    priorities: Sequence[int] | None = None,
) -> bytes:
    """Build a MessageBatch. ``ids=None`` lets the broker generate every id."""
    n = len(timestamps)
    if len(payloads) != n or (ids is not None and len(ids) != n):
        raise InvalidArgument("timestamps, payloads and ids must have the same length")
    if priorities is not None and len(priorities) != n:
        raise InvalidArgument("one priority per message")
    if priorities is not None and any(p < 0 or p > 0xFFFFFFFF for p in priorities):
        raise InvalidArgument("a priority is a number from 0 (most urgent)")
    builder = flatbuffers.Builder(64 + n * 24 + sum(len(p) for p in payloads))
    ts = builder.CreateNumpyVector(np.asarray(timestamps, dtype=np.int64))
    id_cols = _text_column(builder, ids) if ids is not None else None
    pay_cols = _blob_column(builder, payloads)
    md = (
        builder.CreateNumpyVector(np.asarray(max_deliveries, dtype=np.uint32))
        if max_deliveries is not None
        else None
    )
    exp = (
        builder.CreateNumpyVector(np.asarray(expires_at, dtype=np.int64))
        if expires_at is not None
        else None
    )
    pri = (
        builder.CreateNumpyVector(np.asarray(priorities, dtype=np.uint32))
        if priorities is not None
        else None
    )
    MessageBatch.Start(builder)
    MessageBatch.AddTimestamps(builder, ts)
    if id_cols is not None:
        MessageBatch.AddIdOffsets(builder, id_cols[0])
        MessageBatch.AddIds(builder, id_cols[1])
    MessageBatch.AddPayloadOffsets(builder, pay_cols[0])
    MessageBatch.AddPayloads(builder, pay_cols[1])
    if md is not None:
        MessageBatch.AddMaxDeliveries(builder, md)
    if exp is not None:
        MessageBatch.AddExpiresAt(builder, exp)
    if pri is not None:
        MessageBatch.AddPriorities(builder, pri)
    builder.Finish(MessageBatch.End(builder))
    return bytes(builder.Output())


def _blob(array: Any) -> bytes:
    return array.tobytes() if isinstance(array, np.ndarray) else b""


@contextlib.contextmanager
def _frame(table: str) -> Iterator[None]:
    """Turn whatever a corrupt ``table`` frame makes the generated accessors
    raise into ``InvalidArgument``."""
    try:
        yield
    except InvalidArgument:
        raise
    except (UnicodeDecodeError, ValueError, TypeError, IndexError, OverflowError) as exc:
        raise InvalidArgument(f"malformed {table} frame: {exc}") from exc
    except Exception as exc:  # struct.error and friends from a corrupt buffer
        raise InvalidArgument(f"malformed {table} frame: {type(exc).__name__}") from exc


def decode_messages(buf: bytes, max_messages: int | None = None) -> ProduceBatch:
    """Decode and validate a MessageBatch frame; one of over ``max_messages``
    messages is refused before its columns are read."""
    with _frame("MessageBatch"):
        batch = MessageBatch.MessageBatch.GetRootAs(buf, 0)
        if max_messages is not None and batch.TimestampsLength() > max_messages:
            raise InvalidArgument(
                f"a produce frame carries at most {max_messages} messages, this one"
                f" {batch.TimestampsLength()}: split it"
            )
        ts_col = batch.TimestampsAsNumpy()
        timestamps: list[int] = ts_col.tolist() if isinstance(ts_col, np.ndarray) else []
        n = len(timestamps)
        payloads = _split(
            _blob(batch.PayloadsAsNumpy()), batch.PayloadOffsetsAsNumpy(), n, "payload"
        )
        raw_ids = batch.IdsAsNumpy()
        if batch.IdOffsetsIsNone() or batch.IdOffsetsLength() == 0:
            ids = [""] * n
        else:
            ids = _split_text(_blob(raw_ids), batch.IdOffsetsAsNumpy(), n, "id")
        md = _column(batch.MaxDeliveriesAsNumpy(), n, "max_deliveries")
        exp = _column(batch.ExpiresAtAsNumpy(), n, "expires_at")
        pri = _column(batch.PrioritiesAsNumpy(), n, "priorities")
    return ProduceBatch(timestamps, ids, payloads, md, exp, pri)


def encode_results(status: Sequence[int], ids: Sequence[str]) -> bytes:
    builder = flatbuffers.Builder(64 + len(ids) * 40)
    st = builder.CreateNumpyVector(np.asarray(status, dtype=np.uint8))
    id_cols = _text_column(builder, ids)
    ProduceResults.Start(builder)
    ProduceResults.AddStatus(builder, st)
    ProduceResults.AddIdOffsets(builder, id_cols[0])
    ProduceResults.AddIds(builder, id_cols[1])
    builder.Finish(ProduceResults.End(builder))
    return bytes(builder.Output())


@_frame("ProduceResults")
def decode_results(buf: bytes) -> tuple[list[int], list[str]]:
    res = ProduceResults.ProduceResults.GetRootAs(buf, 0)
    st = res.StatusAsNumpy()
    status: list[int] = st.tolist() if isinstance(st, np.ndarray) else []
    ids = [
        i.decode()
        for i in _split(_blob(res.IdsAsNumpy()), res.IdOffsetsAsNumpy(), len(status), "id")
    ]
    return status, ids


def encode_deliveries(
    deliveries: Sequence[LeasedMessage], lease_until: int, topic: Topic | None = None
) -> bytes:
    """One DeliveryBatch frame of ``deliveries``, whatever its size (``topic``:
    see ``delivery_frames``)."""
    payloads = [d.payload for d in deliveries]
    return _encode_deliveries(deliveries, payloads, sum(map(len, payloads)), lease_until, topic)


def delivery_frames(
    deliveries: Sequence[LeasedMessage],
    lease_until: int,
    max_bytes: int,
    topic: Topic | None = None,
) -> list[tuple[bytes, Sequence[LeasedMessage]]]:
    """``deliveries`` as DeliveryBatch frames of at most ``max_bytes`` each (by
    ``frames.frame_bytes``; a larger message goes alone), with what each carries.
    The common case, one frame, costs one ``len`` per message over the encoding.
    Of a priority ``topic`` the frames carry each message's priority, and the
    time it became available where storage holds its rank."""
    payloads = [d.payload for d in deliveries]
    total = sum(map(len, payloads))
    if frame_bytes(len(payloads), total) <= max_bytes:
        return [(_encode_deliveries(deliveries, payloads, total, lease_until, topic), deliveries)]
    sizes = list(map(len, payloads))
    out: list[tuple[bytes, Sequence[LeasedMessage]]] = []
    start = 0
    for end in cuts(sizes, len(sizes), max_bytes):
        part, part_payloads = deliveries[start:end], payloads[start:end]
        size = sum(sizes[start:end])
        out.append((_encode_deliveries(part, part_payloads, size, lease_until, topic), part))
        start = end
    return out


def shown_timestamps(topic: Topic, timestamps: I64, priorities: I64) -> I64:
    """What users see of a priority topic's timestamps: a rank becomes the time
    the message became available (core/priority.py); others stay."""
    ranked = timestamps < 0
    if not ranked.any():
        return timestamps
    since = timestamps + (prio.RANK_BASE + topic.created_at_ms) - priorities * prio.step(topic)
    return np.where(ranked, since, timestamps)


def _encode_deliveries(
    deliveries: Sequence[LeasedMessage],
    payloads: list[bytes],
    total: int,
    lease_until: int,
    topic: Topic | None,
) -> bytes:
    n = len(deliveries)
    builder = flatbuffers.Builder(128 + n * 52 + total)
    timestamps = np.fromiter((d.timestamp for d in deliveries), np.int64, n)
    pri = None
    if topic is not None and topic.settings.kind == KIND_PRIORITY:
        priorities = np.fromiter((d.priority for d in deliveries), np.int64, n)
        timestamps = shown_timestamps(topic, timestamps, priorities)
        pri = builder.CreateNumpyVector(priorities.astype(np.uint32))
    ts = builder.CreateNumpyVector(timestamps)
    vs = builder.CreateNumpyVector(np.fromiter((d.version for d in deliveries), np.uint64, n))
    dl = builder.CreateNumpyVector(np.fromiter((d.deliveries for d in deliveries), np.uint32, n))
    id_cols = _text_column(builder, [d.id for d in deliveries])
    pay_cols = _blob_column(builder, payloads)
    DeliveryBatch.Start(builder)
    DeliveryBatch.AddTimestamps(builder, ts)
    DeliveryBatch.AddVersions(builder, vs)
    DeliveryBatch.AddDeliveries(builder, dl)
    DeliveryBatch.AddIdOffsets(builder, id_cols[0])
    DeliveryBatch.AddIds(builder, id_cols[1])
    DeliveryBatch.AddPayloadOffsets(builder, pay_cols[0])
    DeliveryBatch.AddPayloads(builder, pay_cols[1])
    DeliveryBatch.AddLeaseUntil(builder, lease_until)
    if pri is not None:
        DeliveryBatch.AddPriorities(builder, pri)
    builder.Finish(DeliveryBatch.End(builder))
    return bytes(builder.Output())


class DeliveryColumns(NamedTuple):
    """A DeliveryBatch as columns (one list per field), for readers that build
    their own object per delivery."""

    ids: list[str]
    timestamps: list[int]
    payloads: list[bytes]
    versions: list[int]
    deliveries: list[int]
    lease_until: int
    priorities: list[int] | None = None  # None: a timeline (every priority 0)


@_frame("DeliveryBatch")
def decode_delivery_columns(buf: bytes) -> DeliveryColumns:
    batch = DeliveryBatch.DeliveryBatch.GetRootAs(buf, 0)
    ts_col = batch.TimestampsAsNumpy()
    if not isinstance(ts_col, np.ndarray):
        return DeliveryColumns([], [], [], [], [], batch.LeaseUntil(), None)
    n = len(ts_col)
    ids = _split_text(_blob(batch.IdsAsNumpy()), batch.IdOffsetsAsNumpy(), n, "id")
    payloads = _split(_blob(batch.PayloadsAsNumpy()), batch.PayloadOffsetsAsNumpy(), n, "payload")
    versions = _column(batch.VersionsAsNumpy(), n, "versions")
    deliveries = _column(batch.DeliveriesAsNumpy(), n, "deliveries")
    if versions is None or deliveries is None:
        raise InvalidArgument("malformed batch: versions or deliveries missing")
    priorities = _column(batch.PrioritiesAsNumpy(), n, "priorities")
    return DeliveryColumns(
        ids, ts_col.tolist(), payloads, versions, deliveries, batch.LeaseUntil(), priorities
    )


def decode_deliveries(buf: bytes) -> tuple[list[LeasedMessage], int]:
    c = decode_delivery_columns(buf)
    priorities = c.priorities if c.priorities is not None else [0] * len(c.ids)
    out = [
        LeasedMessage(*row)
        for row in zip(
            c.ids, c.timestamps, c.payloads, c.versions, c.deliveries, priorities, strict=True
        )
    ]
    return out, c.lease_until
