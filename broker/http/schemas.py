"""JSON Schemas of the protobuf messages as ``codec.py`` writes and reads them,
made from the messages' descriptors: the OpenAPI document and the codec
cannot say different things."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from google.protobuf.descriptor import FieldDescriptor

from dejaq.broker.api import validation
from dejaq.broker.http.codec import (
    BASE64_SUFFIX,
    INT_RANGES,
    ProtoField,
    ProtoMessage,
    is_map,
    is_repeated,
    map_value,
)

F = FieldDescriptor
Schema = dict[str, Any]
# What a request's topic name must match (broker/api/validation.py); answers may
# also name a topic's companions (its cron timeline), so only requests say it.
TOPIC_NAME: Schema = {"type": "string", "pattern": f"^{validation.NAME.pattern}$"}
TOPIC_FIELDS = {"name", "topic"}
# Messages whose ``name`` is not a topic's (a webhook's request header).
NOT_TOPICS = {"Header"}


def text_and_base64(name: str) -> dict[str, Schema]:
    """The two spellings of a ``bytes`` field."""
    return {
        name: {
            "type": "string",
            "description": f"{name} as text (UTF-8); bytes that are not text travel as"
            f" {name}{BASE64_SUFFIX}",
        },
        name + BASE64_SUFFIX: {
            "type": "string",
            "contentEncoding": "base64",
            "description": f"{name} as base64 (any bytes); give {name} or this, not both",
        },
    }


def message_schema(descriptor: ProtoMessage, output: bool, skip: Collection[str] = ()) -> Schema:
    """An object of the message's fields; in an answer every field is present
    but an unset optional one and the bytes (text or base64)."""
    properties: dict[str, Schema] = {}
    required = []
    exclusive = []
    for field in descriptor.fields:
        if field.name in skip:
            continue
        if field.type == F.TYPE_BYTES and not is_repeated(field):
            properties.update(text_and_base64(field.name))
            exclusive.append([field.name, field.name + BASE64_SUFFIX])
            continue
        properties[field.name] = field_schema(field, output)
        if output and not field.has_presence:
            required.append(field.name)
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    if exclusive and not output:
        schema["allOf"] = [one_spelling(names) for names in exclusive]
    return schema


def one_spelling(names: list[str]) -> Schema:
    """Not both spellings of a bytes field."""
    return {"not": {"required": names}}


def field_schema(field: ProtoField, output: bool) -> Schema:
    if (
        not output
        and field.name in TOPIC_FIELDS
        and field.type == F.TYPE_STRING
        and field.containing_type.name not in NOT_TOPICS
    ):
        return dict(TOPIC_NAME)
    if is_map(field):
        return {"type": "object", "additionalProperties": scalar_schema(map_value(field), output)}
    item = scalar_schema(field, output)
    return {"type": "array", "items": item} if is_repeated(field) else item


def scalar_schema(field: ProtoField, output: bool) -> Schema:
    kind = field.type
    if kind in INT_RANGES:
        return integer_schema(kind)
    if kind == F.TYPE_DOUBLE:
        return {"type": "number"}
    if kind == F.TYPE_BOOL:
        return {"type": "boolean"}
    if kind == F.TYPE_STRING:
        return {"type": "string"}
    if kind == F.TYPE_ENUM:
        return {"type": "string", "enum": list(field.enum_type.values_by_name)}
    if kind == F.TYPE_MESSAGE:
        return message_schema(field.message_type, output)
    return {"type": "string", "contentEncoding": "base64"}


def integer_schema(kind: int) -> Schema:
    """An integer of a wire type (``FieldDescriptor.TYPE_UINT32``, ...): its range."""
    low, high = INT_RANGES[kind]
    return {"type": "integer", "minimum": low, "maximum": high}
