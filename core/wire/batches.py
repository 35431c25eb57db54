"""Encode and decode the columnar FlatBuffers batches of fbs/batch.fbs.

Each column is packed or read in one call (not one per message): scalar
columns as ``struct`` or numpy arrays; ids and payloads as one blob plus an
offsets vector each; keys and encoded headers the same way, their vectors
left out of a frame where no message has one. The tables are laid out and
read by ``core/wire/flat.py`` (the generated classes in fbs/batch are the
reference its tests check it against). Decoding validates the shape of a
frame and raises ``InvalidArgument`` for anything malformed, so a bad frame
never reaches storage.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from types import TracebackType
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from dejaq.core import priority as prio
from dejaq.core.deliveries import Deliveries, columns
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import KIND_PRIORITY, LeasedMessage, Topic
from dejaq.core.wire.flat import Reader, write_table
from dejaq.core.wire.frames import cuts, frame_bytes

I64 = npt.NDArray[np.int64]
_I64: Final = struct.Struct("<q")


@dataclass(frozen=True, slots=True)
class ProduceBatch:
    """A decoded MessageBatch. An empty id means "generate one"."""

    timestamps: list[int]
    ids: list[str]
    payloads: list[bytes]
    max_deliveries: list[int] | None = None
    expires_at: list[int] | None = None
    priorities: list[int] | None = None  # None = every message 0
    # As received, each checked by the broker per message (core/keys.py,
    # core/headers.py): a bad one refuses its message, not the frame.
    keys: list[bytes] | None = None  # UTF-8; None = no message has a key
    headers: list[bytes] | None = None  # encoded; None = no message has any

    def __len__(self) -> int:
        return len(self.timestamps)


def _pack(code: str, values: Sequence[int] | I64) -> bytes:
    """A column as little-endian bytes (``code``: a ``struct`` format letter)."""
    if isinstance(values, np.ndarray):
        return values.astype(f"<{code}").tobytes()
    try:
        return struct.pack(f"<{len(values)}{code}", *values)
    except struct.error as exc:
        raise InvalidArgument(f"a value does not fit its column: {exc}") from exc


def _offsets(lengths: Iterable[int]) -> bytes:
    """The offsets vector of a blob of items of these lengths (one more than items)."""
    offsets = list(accumulate(lengths, initial=0))
    return struct.pack(f"<{len(offsets)}I", *offsets)


def _blob_column(items: Sequence[bytes]) -> tuple[bytes, bytes]:
    return _offsets(map(len, items)), b"".join(items)


def _text_column(items: Sequence[str]) -> tuple[bytes, bytes]:
    """Strings as one UTF-8 blob plus offsets; ASCII strings encode in one call."""
    joined = "".join(items)
    blob = joined.encode()
    if len(blob) == len(joined):
        return _offsets(map(len, items)), blob
    return _blob_column([i.encode() for i in items])


def _bounds(size: int, offsets: Any, count: int, what: str) -> list[int]:
    """The checked offsets vector of a blob of ``size`` bytes, as a list."""
    if not isinstance(offsets, np.ndarray) or len(offsets) != count + 1:
        raise InvalidArgument(f"malformed batch: {what} offsets do not match the message count")
    o: list[int] = offsets.tolist()
    if o[0] != 0 or o[-1] != size or not _ascending(o):
        raise InvalidArgument(f"malformed batch: {what} offsets are out of order or out of range")
    return o


def _ascending(o: list[int]) -> bool:
    # A loop, compiled: numpy's diff and any cost more in calls (several µs)
    # than they save on the few hundred offsets of a frame.
    last = o[0] if o else 0
    for x in o:
        if x < last:
            return False
        last = x
    return True


def _split(blob: bytes | None, offsets: Any, count: int, what: str) -> list[bytes]:
    """Slice a blob by its offsets vector, checking every bound first."""
    if count == 0:
        return []
    blob = blob or b""
    b = _bounds(len(blob), offsets, count, what)
    return [blob[b[i] : b[i + 1]] for i in range(count)]


def _split_text(blob: bytes | None, offsets: Any, count: int, what: str) -> list[str]:
    """Like ``_split`` for UTF-8 strings; an ASCII blob decodes in one call."""
    if count == 0:
        return []
    blob = blob or b""
    b = _bounds(len(blob), offsets, count, what)
    text = blob.decode()
    if len(text) == len(blob):  # ASCII: byte offsets are character offsets
        return [text[b[i] : b[i + 1]] for i in range(count)]
    return [blob[b[i] : b[i + 1]].decode() for i in range(count)]


def _column(value: Any, count: int, what: str) -> list[int] | None:
    if value is None or len(value) == 0:
        return None
    if len(value) != count:
        raise InvalidArgument(f"malformed batch: {what} has {len(value)} entries for {count}")
    return list(value.tolist())


# Slots: each field's position in its table in fbs/batch.fbs (Final: class-level
# constants, which is also how mypyc compiles them).
class _Message:
    TIMESTAMPS: Final = 0
    ID_OFFSETS: Final = 1
    IDS: Final = 2
    PAYLOAD_OFFSETS: Final = 3
    PAYLOADS: Final = 4
    MAX_DELIVERIES: Final = 5
    EXPIRES_AT: Final = 6
    PRIORITIES: Final = 7
    KEY_OFFSETS: Final = 8
    KEYS: Final = 9
    HEADER_OFFSETS: Final = 10
    HEADERS: Final = 11


class _Results:
    STATUS: Final = 0
    ID_OFFSETS: Final = 1
    IDS: Final = 2


class _Delivery:
    TIMESTAMPS: Final = 0
    VERSIONS: Final = 1
    DELIVERIES: Final = 2
    ID_OFFSETS: Final = 3
    IDS: Final = 4
    PAYLOAD_OFFSETS: Final = 5
    PAYLOADS: Final = 6
    LEASE_UNTIL: Final = 7
    PRIORITIES: Final = 8
    KEY_OFFSETS: Final = 9
    KEYS: Final = 10
    HEADER_OFFSETS: Final = 11
    HEADERS: Final = 12


def encode_messages(
    timestamps: Sequence[int] | I64,
    payloads: Sequence[bytes],
    ids: Sequence[str] | None = None,
    max_deliveries: Sequence[int] | None = None,
    expires_at: Sequence[int] | None = None,
    priorities: Sequence[int] | None = None,
    keys: Sequence[str] | None = None,
    headers: Sequence[bytes] | None = None,
) -> bytes:
    """Build a MessageBatch. ``ids=None`` lets the broker generate every id;
    ``keys`` ("" = none) and ``headers`` (encoded, b"" = none) travel only when
    some message has one."""
    n = len(timestamps)
    if len(payloads) != n or (ids is not None and len(ids) != n):
        raise InvalidArgument("timestamps, payloads and ids must have the same length")
    if priorities is not None and len(priorities) != n:
        raise InvalidArgument("one priority per message")
    if (keys is not None and len(keys) != n) or (headers is not None and len(headers) != n):
        raise InvalidArgument("one key and one set of headers per message")
    if priorities is not None and any(p < 0 or p > 0xFFFFFFFF for p in priorities):
        raise InvalidArgument("a priority is a number from 0 (most urgent)")
    m = _Message
    pay_offsets, pay_blob = _blob_column(payloads)
    columns = [
        (m.TIMESTAMPS, _pack("q", timestamps), 8),
        (m.PAYLOAD_OFFSETS, pay_offsets, 4),
        (m.PAYLOADS, pay_blob, 1),
    ]
    if ids is not None:
        id_offsets, id_blob = _text_column(ids)
        columns += [(m.ID_OFFSETS, id_offsets, 4), (m.IDS, id_blob, 1)]
    if max_deliveries is not None:
        columns.append((m.MAX_DELIVERIES, _pack("I", max_deliveries), 4))
    if expires_at is not None:
        columns.append((m.EXPIRES_AT, _pack("q", expires_at), 8))
    if priorities is not None:
        columns.append((m.PRIORITIES, _pack("I", priorities), 4))
    columns += _extras(keys, headers, m.KEY_OFFSETS, m.HEADER_OFFSETS)
    return write_table(columns)


def _extras(
    keys: Sequence[str] | None, headers: Sequence[bytes] | None, key_slot: int, header_slot: int
) -> list[tuple[int, bytes, int]]:
    """The key and header columns (each blob in the slot after its offsets),
    those some message fills."""
    columns = []
    if keys is not None and any(keys):
        key_offsets, key_blob = _text_column(keys)
        columns += [(key_slot, key_offsets, 4), (key_slot + 1, key_blob, 1)]
    if headers is not None and any(headers):
        header_offsets, header_blob = _blob_column(headers)
        columns += [(header_slot, header_offsets, 4), (header_slot + 1, header_blob, 1)]
    return columns


# Under this, a table's root offset, vtable and fields; each vector adds its
# length (4 bytes) and at most 7 bytes of alignment to its elements.
_TABLE_AT_MOST = 128
_VECTOR_AT_MOST = 12


def messages_frame_at_most(
    count: int, payload_bytes: int, id_chars: int, option_columns: int = 0, extra_bytes: int = 0
) -> int:
    """At least the size of the MessageBatch ``encode_messages`` makes of
    ``count`` messages with ids (``id_chars`` characters in all, at most 4 bytes
    each in UTF-8), ``payload_bytes`` of payloads, ``option_columns`` of the
    optional columns and ``extra_bytes`` of keys and encoded headers: what a
    caller needs to know a frame is within a byte limit without building it."""
    vectors = [8 * count, 4 * (count + 1), payload_bytes, 4 * (count + 1), 4 * id_chars]
    vectors += [8 * count] * option_columns
    if extra_bytes:
        vectors += [4 * (count + 1), 4 * (count + 1), extra_bytes]
    return _TABLE_AT_MOST + sum(v + _VECTOR_AT_MOST for v in vectors)


class _Frame:
    """Turns whatever a corrupt ``table`` frame makes decoding raise into
    ``InvalidArgument``. A class rather than a generator-based context manager:
    mypyc compiles its ``__enter__`` and ``__exit__`` as native calls."""

    __slots__ = ("table",)

    def __init__(self, table: str) -> None:
        self.table = table

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None or isinstance(exc, InvalidArgument) or not isinstance(exc, Exception):
            return
        if isinstance(exc, (UnicodeDecodeError, ValueError, TypeError, IndexError, OverflowError)):
            raise InvalidArgument(f"malformed {self.table} frame: {exc}") from exc
        # struct.error and friends from a corrupt buffer
        raise InvalidArgument(f"malformed {self.table} frame: {type(exc).__name__}") from exc


def decode_messages(buf: bytes, max_messages: int | None = None) -> ProduceBatch:
    """Decode and validate a MessageBatch frame; one of over ``max_messages``
    messages is refused before its columns are read."""
    m = _Message
    with _Frame("MessageBatch"):
        r = Reader(buf, "MessageBatch")
        ts_col = r.vector(m.TIMESTAMPS, "<i8")
        n = 0 if ts_col is None else len(ts_col)
        if max_messages is not None and n > max_messages:
            raise InvalidArgument(
                f"a produce frame carries at most {max_messages} messages, this one {n}: split it"
            )
        timestamps: list[int] = [] if ts_col is None else ts_col.tolist()
        payloads = _split(r.blob(m.PAYLOADS), r.vector(m.PAYLOAD_OFFSETS, "<u4"), n, "payload")
        id_offsets = r.vector(m.ID_OFFSETS, "<u4")
        if id_offsets is None or len(id_offsets) == 0:
            ids = [""] * n
        else:
            ids = _split_text(r.blob(m.IDS), id_offsets, n, "id")
        md = _column(r.vector(m.MAX_DELIVERIES, "<u4"), n, "max_deliveries")
        exp = _column(r.vector(m.EXPIRES_AT, "<i8"), n, "expires_at")
        pri = _column(r.vector(m.PRIORITIES, "<u4"), n, "priorities")
        keys = _optional_blobs(r, m.KEY_OFFSETS, n, "key")
        headers = _optional_blobs(r, m.HEADER_OFFSETS, n, "headers")
    return ProduceBatch(timestamps, ids, payloads, md, exp, pri, keys, headers)


def _optional_blobs(r: Reader, offsets_slot: int, count: int, what: str) -> list[bytes] | None:
    """A blob column (its blob in the slot after its offsets); None when absent,
    as from a client that does not send it."""
    offsets = r.vector(offsets_slot, "<u4")
    if offsets is None or len(offsets) == 0:
        return None
    return _split(r.blob(offsets_slot + 1), offsets, count, what)


def _optional_texts(r: Reader, offsets_slot: int, count: int, what: str) -> list[str] | None:
    offsets = r.vector(offsets_slot, "<u4")
    if offsets is None or len(offsets) == 0:
        return None
    return _split_text(r.blob(offsets_slot + 1), offsets, count, what)


def encode_results(status: Sequence[int], ids: Sequence[str]) -> bytes:
    id_offsets, id_blob = _text_column(ids)
    return write_table(
        [
            (_Results.STATUS, bytes(status), 1),
            (_Results.ID_OFFSETS, id_offsets, 4),
            (_Results.IDS, id_blob, 1),
        ]
    )


def decode_results(buf: bytes) -> tuple[list[int], list[str]]:
    with _Frame("ProduceResults"):
        r = Reader(buf, "ProduceResults")
        status = list(r.blob(_Results.STATUS) or b"")
        offsets = r.vector(_Results.ID_OFFSETS, "<u4")
        ids = _split_text(r.blob(_Results.IDS), offsets, len(status), "id")
    return status, ids


def encode_deliveries(
    deliveries: Sequence[LeasedMessage], lease_until: int, topic: Topic | None = None
) -> bytes:
    """One DeliveryBatch frame of ``deliveries``, whatever its size (``topic``:
    see ``delivery_frames``)."""
    return _encode_deliveries(columns(deliveries), lease_until, topic)


def delivery_frames(
    deliveries: Sequence[LeasedMessage],
    lease_until: int,
    max_bytes: int,
    topic: Topic | None = None,
) -> list[tuple[bytes, Deliveries]]:
    """``deliveries`` as DeliveryBatch frames of at most ``max_bytes`` each (by
    ``frames.frame_bytes``; a larger message goes alone), with what each carries.
    Written from columns (``core/deliveries.py``): deliveries leased as columns
    are never made one object each. The common case, one frame, costs one
    ``len`` per message over the encoding. Of a priority ``topic`` the frames
    carry each message's priority, and the time it became available where
    storage holds its rank."""
    d = columns(deliveries)
    sizes = list(map(len, d.payloads))
    # Headers count as payload bytes (a key's at most 256 bytes are within
    # frames.MESSAGE_OVERHEAD_BYTES).
    if d.headers is not None:
        sizes = [p + len(h) for p, h in zip(sizes, d.headers, strict=True)]
    if frame_bytes(len(sizes), sum(sizes)) <= max_bytes:
        return [(_encode_deliveries(d, lease_until, topic), d)]
    out: list[tuple[bytes, Deliveries]] = []
    start = 0
    for end in cuts(sizes, len(sizes), max_bytes):
        part = d[start:end]
        out.append((_encode_deliveries(part, lease_until, topic), part))
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


def _encode_deliveries(d: Deliveries, lease_until: int, topic: Topic | None) -> bytes:
    c = _Delivery
    id_offsets, id_blob = _text_column(d.ids)
    pay_offsets, pay_blob = _blob_column(d.payloads)
    table = [
        (c.VERSIONS, _pack("Q", d.versions), 8),
        (c.DELIVERIES, _pack("I", d.deliveries), 4),
        (c.ID_OFFSETS, id_offsets, 4),
        (c.IDS, id_blob, 1),
        (c.PAYLOAD_OFFSETS, pay_offsets, 4),
        (c.PAYLOADS, pay_blob, 1),
    ]
    if topic is not None and topic.settings.kind == KIND_PRIORITY:
        priorities = np.array(d.priorities or [0] * len(d.ids), np.int64)
        timestamps = _pack(
            "q", shown_timestamps(topic, np.array(d.timestamps, np.int64), priorities)
        )
        table.append((c.PRIORITIES, _pack("I", priorities), 4))
    else:
        timestamps = _pack("q", d.timestamps)  # a list: one struct call, no numpy
    # Each looked for in one C pass: most batches have neither.
    table += _extras(d.keys, d.headers, c.KEY_OFFSETS, c.HEADER_OFFSETS)
    table.append((c.TIMESTAMPS, timestamps, 8))
    return write_table(table, [(c.LEASE_UNTIL, lease_until)])


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
    keys: list[str] | None = None  # None: no delivery has a key
    headers: list[bytes] | None = None  # encoded; None: no delivery has any


def decode_delivery_columns(buf: bytes) -> DeliveryColumns:
    with _Frame("DeliveryBatch"):
        return _delivery_columns(buf)


def _delivery_columns(buf: bytes) -> DeliveryColumns:
    d = _Delivery
    r = Reader(buf, "DeliveryBatch")
    lease_until = r.scalar(d.LEASE_UNTIL, _I64, 0)
    ts_col = r.vector(d.TIMESTAMPS, "<i8")
    if ts_col is None:
        return DeliveryColumns([], [], [], [], [], lease_until)
    n = len(ts_col)
    ids = _split_text(r.blob(d.IDS), r.vector(d.ID_OFFSETS, "<u4"), n, "id")
    payloads = _split(r.blob(d.PAYLOADS), r.vector(d.PAYLOAD_OFFSETS, "<u4"), n, "payload")
    versions = _column(r.vector(d.VERSIONS, "<u8"), n, "versions")
    deliveries = _column(r.vector(d.DELIVERIES, "<u4"), n, "deliveries")
    if versions is None or deliveries is None:
        raise InvalidArgument("malformed batch: versions or deliveries missing")
    priorities = _column(r.vector(d.PRIORITIES, "<u4"), n, "priorities")
    keys = _optional_texts(r, d.KEY_OFFSETS, n, "key")
    headers = _optional_blobs(r, d.HEADER_OFFSETS, n, "headers")
    return DeliveryColumns(
        ids, ts_col.tolist(), payloads, versions, deliveries, lease_until, priorities, keys, headers
    )


def decode_deliveries(buf: bytes) -> tuple[list[LeasedMessage], int]:
    c = decode_delivery_columns(buf)
    n = len(c.ids)
    priorities = c.priorities if c.priorities is not None else [0] * n
    keys = c.keys if c.keys is not None else [""] * n
    headers = c.headers if c.headers is not None else [b""] * n
    out = [
        LeasedMessage(*row)
        for row in zip(
            c.ids,
            c.timestamps,
            c.payloads,
            c.versions,
            c.deliveries,
            priorities,
            keys,
            headers,
            strict=True,
        )
    ]
    return out, c.lease_until
