"""Protobuf messages as JSON, and back, read from the messages' descriptors.

Numbers stay JSON numbers (protobuf's own JSON mapping writes 64-bit integers
as strings), enums travel by name, and a ``bytes`` field ``payload`` travels
as ``payload`` (text, UTF-8) or ``payload_base64`` (any bytes): an answer uses
the text form when the bytes are UTF-8, a request may send either.

Reading is strict: an unknown key, a value of the wrong type or out of its
field's range is ``InvalidArgument`` naming the key, so no input reaches a
handler half-understood.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Collection, Mapping
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from dejaq.core.errors import InvalidArgument

# A protobuf descriptor (the pure Python or the upb one: typed apart, used alike).
ProtoField = Any
ProtoMessage = Any
BASE64_SUFFIX = "_base64"
INTEGER = re.compile(r"-?[0-9]{1,30}")  # ASCII digits only: int() takes others too
F = FieldDescriptor
# The range of each integer type of the wire.
INT_RANGES = {
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
}


def is_repeated(field: ProtoField) -> bool:
    return bool(field.is_repeated)


def is_map(field: ProtoField) -> bool:
    """A ``map<K, V>`` field: a JSON object (protobuf holds it as repeated entries)."""
    entry = field.message_type
    return entry is not None and bool(entry.GetOptions().map_entry)


def map_value(field: ProtoField) -> ProtoField:
    """The field of a map's values."""
    return field.message_type.fields_by_name["value"]


def to_json(message: Message) -> dict[str, Any]:
    """``message`` as a JSON object: every field, an unset optional one left out."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if is_map(field):
            values = map_value(field)  # by name: protobuf keeps no order of a map
            out[field.name] = {k: _value_to_json(values, value[k]) for k in sorted(value)}
        elif is_repeated(field):
            out[field.name] = [_value_to_json(field, v) for v in value]
        elif field.has_presence and not message.HasField(field.name):
            continue
        elif field.type == F.TYPE_BYTES:
            out.update(bytes_to_json(field.name, value))
        else:
            out[field.name] = _value_to_json(field, value)
    return out


def bytes_to_json(name: str, value: bytes) -> dict[str, str]:
    """``{name: text}`` for UTF-8 bytes, else ``{name_base64: base64}``."""
    try:
        return {name: value.decode("utf-8")}
    except UnicodeDecodeError:
        return {name + BASE64_SUFFIX: base64.b64encode(value).decode("ascii")}


def _value_to_json(field: ProtoField, value: Any) -> Any:
    if field.type == F.TYPE_MESSAGE:
        return to_json(value)
    if field.type == F.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    if field.type == F.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


def from_json(
    cls: type[Message], doc: Any, where: str = "body", skip: Collection[str] = ()
) -> Message:
    """A ``cls`` message from JSON ``doc``; ``skip`` names fields it may not set
    (they come from the request's path)."""
    message = cls()
    fill(message, doc, where, skip)
    return message


def fill(message: Message, doc: Any, where: str, skip: Collection[str] = ()) -> None:
    if not isinstance(doc, Mapping):
        raise InvalidArgument(f"{where} must be a JSON object")
    fields = message.DESCRIPTOR.fields_by_name
    for key, value in doc.items():
        name = key.removesuffix(BASE64_SUFFIX) if key.endswith(BASE64_SUFFIX) else key
        field = fields.get(name)
        if field is None or name in skip or (name != key and field.type != F.TYPE_BYTES):
            raise InvalidArgument(f"{where}: unknown field {key!r}")
        here = f"{where}.{key}"
        if field.type == F.TYPE_BYTES and not is_repeated(field):
            if name in doc and name + BASE64_SUFFIX in doc:
                raise InvalidArgument(f"{where}: give {name} or {name}{BASE64_SUFFIX}, not both")
            setattr(message, name, bytes_from_json(value, here, encoded=name != key))
        elif is_map(field):
            if not isinstance(value, Mapping):
                raise InvalidArgument(f"{here} must be a JSON object")
            target = getattr(message, name)
            for k, v in value.items():
                target[k] = _scalar(map_value(field), v, f"{here}.{k}")
        elif is_repeated(field):
            if not isinstance(value, list):
                raise InvalidArgument(f"{here} must be a list")
            target = getattr(message, name)
            for i, item in enumerate(value):
                if field.type == F.TYPE_MESSAGE:
                    fill(target.add(), item, f"{here}[{i}]")
                else:
                    target.append(_scalar(field, item, f"{here}[{i}]"))
        elif field.type == F.TYPE_MESSAGE:
            fill(getattr(message, name), value, here)
        else:
            setattr(message, name, _scalar(field, value, here))


def bytes_from_json(value: Any, where: str, encoded: bool) -> bytes:
    if not isinstance(value, str):
        raise InvalidArgument(f"{where} must be a string")
    if not encoded:
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate from a \\ud800 escape
            raise InvalidArgument(f"{where} is not valid text: {exc.reason}") from None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"{where} is not base64") from None


def _scalar(field: ProtoField, value: Any, where: str) -> Any:
    kind = field.type
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        number = integer(value)
        if number is None:
            raise InvalidArgument(f"{where} must be an integer")
        if not low <= number <= high:
            raise InvalidArgument(f"{where} must be between {low} and {high}")
        return number
    if kind == F.TYPE_DOUBLE:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise InvalidArgument(f"{where} must be a number")
        if not math.isfinite(value) or abs(value) > 1.7e308:
            raise InvalidArgument(f"{where} must be a finite number")
        return float(value)
    if kind == F.TYPE_BOOL:
        if not isinstance(value, bool):
            raise InvalidArgument(f"{where} must be true or false")
        return value
    if kind == F.TYPE_STRING:
        if not isinstance(value, str):
            raise InvalidArgument(f"{where} must be a string")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgument(f"{where} is not valid text: {exc.reason}") from None
        return value
    if kind == F.TYPE_ENUM:
        names = field.enum_type.values_by_name
        if not isinstance(value, str) or value not in names:
            raise InvalidArgument(f"{where} must be one of {', '.join(names)}")
        return names[value].number
    raise InvalidArgument(f"{where}: fields of this type are not read from JSON")


def integer(value: Any) -> int | None:
    """A JSON integer: ``7``, or ``7.0`` (JSON Schema counts it one); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def query_to_json(descriptor: ProtoMessage, query: Mapping[str, list[str]]) -> dict[str, Any]:
    """Query parameters typed by the fields they name, for ``from_json``: an
    integer parsed, ``true``/``false`` a bool, a repeated field every value."""
    out: dict[str, Any] = {}
    for key, values in query.items():
        field = descriptor.fields_by_name.get(key)
        if field is None:
            raise InvalidArgument(f"query: unknown parameter {key!r}")
        typed = [_typed(field, v, f"query.{key}") for v in values]
        if is_repeated(field):
            out[key] = typed
        elif len(typed) != 1:
            raise InvalidArgument(f"query: {key} given {len(typed)} times")
        else:
            out[key] = typed[0]
    return out


def _typed(field: ProtoField, text: str, where: str) -> Any:
    if field.type in INT_RANGES:
        if not INTEGER.fullmatch(text):
            raise InvalidArgument(f"{where} must be an integer")
        return int(text)
    if field.type == F.TYPE_BOOL:
        if text not in ("true", "false"):
            raise InvalidArgument(f"{where} must be true or false")
        return text == "true"
    return text
