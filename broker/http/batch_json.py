"""A produce batch's JSON body read, and its answer written, in one C pass each.

The body is decoded straight into typed records by msgspec, which checks the
shape, the types and the integer ranges as it parses: no dict per message, no
Python check per field. It stands for the common, well-formed batch only; any
body it does not take whole (a refusal, a JSON integer written ``7.0``, text
with a lone surrogate, base64 that does not decode) returns None, and the
generic reading (``produce.read_messages``) then decides, so a refusal says
the same thing either way and the two readings never differ on what they
both accept (``tests/broker/http/test_batch_json.py``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Annotated, Any

import msgspec

from dejaq.core import headers as header_codec
from dejaq.core.errors import InvalidArgument
from dejaq.core.keys import check_key

_U32 = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
_I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
# A field a message did not give (null is not "not given": it is refused).
_Unset = msgspec.UnsetType
_UNSET = msgspec.UNSET


@dataclass
class NewMessages:
    ids: list[str]
    timestamps: list[int]
    payloads: list[bytes]
    columns: dict[str, list[int]]  # the optional ones a message gave (0: not given)
    # A message due after a delay instead of at a time (index: delay_ms): its
    # timestamp is set from the broker's clock when the batch is stored.
    delays: dict[int, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)  # one a message, or [] when none has one
    headers: list[bytes] = field(default_factory=list)  # encoded; the same

    def drop_empty_extras(self) -> None:
        """Keys and headers as [] when no message has one (both readings agree)."""
        if not any(self.keys):
            self.keys = []
        if not any(self.headers):
            self.headers = []


# gc=False: records of strings and integers hold no cycles, and left untracked a
# batch of them does not set off the cyclic collector.
class _Message(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    timestamp_ms: _I64
    id: str = ""
    payload: str | _Unset = _UNSET
    payload_base64: str | _Unset = _UNSET
    max_deliveries: _U32 | _Unset = _UNSET
    expires_at_ms: _I64 | _Unset = _UNSET
    priority: _U32 | _Unset = _UNSET
    key: str | _Unset = _UNSET
    headers: dict[str, str] | _Unset = _UNSET


class _Batch(msgspec.Struct, forbid_unknown_fields=True):
    messages: list[_Message]


class _PlainMessage(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The common message: an id, a due time and a text payload."""

    timestamp_ms: _I64
    id: str = ""
    payload: str = ""


class _PlainBatch(msgspec.Struct, forbid_unknown_fields=True):
    messages: list[_PlainMessage]


_PLAIN = msgspec.json.Decoder(_PlainBatch)
_DECODER = msgspec.json.Decoder(_Batch)
_ENCODER = msgspec.json.Encoder()
OPTIONAL = ("max_deliveries", "expires_at_ms", "priority")
_ID = attrgetter("id")
_TIMESTAMP = attrgetter("timestamp_ms")
_PAYLOAD = attrgetter("payload")


def read(raw: bytes, limit: int) -> NewMessages | None:
    """The batch in ``raw``, or None when the generic reading must decide."""
    try:
        plain = _PLAIN.decode(raw).messages
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _read_any(raw, limit)
    if len(plain) > limit:
        return None
    try:
        payloads = [t.encode() for t in map(_PAYLOAD, plain)]
    except UnicodeEncodeError:
        return None
    return NewMessages(list(map(_ID, plain)), list(map(_TIMESTAMP, plain)), payloads, {})


def _read_any(raw: bytes, limit: int) -> NewMessages | None:
    """A batch with base64 payloads or per-message options."""
    try:
        docs = _DECODER.decode(raw).messages
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(docs) > limit:
        return None
    payloads = _payloads(docs)
    if payloads is None:
        return None
    columns: dict[str, list[int]] = {}
    for name in OPTIONAL:
        values: list[Any] = [getattr(d, name) for d in docs]
        if any(v is not _UNSET for v in values):
            columns[name] = [0 if v is _UNSET else v for v in values]
    new = NewMessages(list(map(_ID, docs)), list(map(_TIMESTAMP, docs)), payloads, columns)
    if any(d.key is not _UNSET or d.headers is not _UNSET for d in docs):
        try:
            new.keys = [_key(d.key) for d in docs]
            new.headers = [_headers(d.headers) for d in docs]
        except InvalidArgument:
            return None  # the generic reading names the field
        new.drop_empty_extras()
    return new


def _key(key: str | msgspec.UnsetType) -> str:
    return "" if isinstance(key, msgspec.UnsetType) else check_key(key)


def _headers(headers: dict[str, str] | msgspec.UnsetType) -> bytes:
    if isinstance(headers, msgspec.UnsetType) or not headers:
        return b""
    return header_codec.encode(header_codec.check_headers(headers))


def _payloads(docs: Sequence[_Message]) -> list[bytes] | None:
    out: list[bytes] = []
    for d in docs:
        text, encoded = d.payload, d.payload_base64
        if text is _UNSET and encoded is _UNSET:
            out.append(b"")
        elif encoded is _UNSET:
            assert isinstance(text, str)
            try:
                out.append(text.encode())
            except UnicodeEncodeError:
                return None
        elif text is _UNSET:
            try:
                out.append(base64.b64decode(encoded, validate=True))
            except (binascii.Error, ValueError):
                return None
        else:
            return None  # both given: refused by the generic reading
    return out


class _Result(msgspec.Struct, gc=False):
    id: str
    status: str


class _Answer(msgspec.Struct):
    results: list[_Result]
    rejections: list[dict[str, Any]]


def answer(ids: Sequence[str], statuses: Sequence[str], rejections: list[dict[str, Any]]) -> bytes:
    """The batch's answer as JSON: each message's id and status, then the rejections."""
    results = list(map(_Result, ids, statuses))
    return _ENCODER.encode(_Answer(results, rejections))
