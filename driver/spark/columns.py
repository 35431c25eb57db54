"""Which DataFrame columns mean what: resolved once against the schema, on the
Spark driver, so a wrong name or type fails the job before any task starts."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from dejaq.core.errors import InvalidArgument
from dejaq.driver.spark.options import WriteOptions

_INTS = (IntegerType, LongType)
_TIMES = (IntegerType, LongType, TimestampType, TimestampNTZType)


@dataclass(frozen=True)
class Columns:
    """Column names for each message field (None: absent)."""

    id: str | None
    time: str
    payload: str
    topic: str | None = None
    keys: tuple[str, ...] = ()
    max_deliveries: str | None = None
    expires_at: str | None = None
    message_key: str | None = None
    headers: str | None = None


def _headers_type(schema: StructType, name: str) -> str:
    """``name`` when it is a map of strings to strings, or a string (a JSON object,
    as a CSV gives headers)."""
    _check(schema, name, (MapType, StringType), "the headers (map<string,string>)")
    kind = schema[name].dataType
    if isinstance(kind, MapType) and not (
        isinstance(kind.keyType, StringType) and isinstance(kind.valueType, StringType)
    ):
        raise InvalidArgument(
            f"dejaq: column {name!r} (the headers) is {kind.simpleString()},"
            " not map<string,string> or string (a JSON object)"
        )
    return name


def _check(schema: StructType, name: str, types: tuple[type[DataType], ...], what: str) -> str:
    fields = {f.name: f for f in schema.fields}
    if name not in fields:
        raise InvalidArgument(f"dejaq: no column {name!r} for {what}; columns: {sorted(fields)}")
    if not isinstance(fields[name].dataType, types):
        kinds = " or ".join(t.typeName() for t in types)
        found = fields[name].dataType.simpleString()
        raise InvalidArgument(f"dejaq: column {name!r} ({what}) is {found}, not {kinds}")
    return name


def resolve(schema: StructType, o: WriteOptions) -> Columns:
    names = set(schema.fieldNames())
    if o.time_column:
        time = o.time_column
    else:
        time = "timestamp_ms" if "timestamp_ms" in names else "timestamp"
    id_column = o.id_column if o.id_column in names else None
    if id_column is None and o.id_column != "id":
        _check(schema, o.id_column, (StringType,), "idColumn")
    if id_column is None and not o.key_columns:
        raise InvalidArgument(
            f"dejaq: no id column {o.id_column!r} and no keyColumns: give one, so that a"
            " retried task or a re-run cannot schedule a row twice"
        )
    for key in o.key_columns:
        if key not in names:
            raise InvalidArgument(f"dejaq: no key column {key!r}; columns: {sorted(names)}")
    md = o.max_deliveries_column or ("max_deliveries" if "max_deliveries" in names else None)
    exp = o.expires_at_column or ("expires_at_ms" if "expires_at_ms" in names else None)
    message_key = o.message_key_column or ("key" if "key" in names else None)
    headers = o.headers_column or ("headers" if "headers" in names else None)
    return Columns(
        id=_check(schema, id_column, (StringType,), "the id") if id_column else None,
        time=_check(schema, time, _TIMES, "the time (epoch ms, or a timestamp)"),
        payload=_check(schema, o.payload_column, (StringType, BinaryType), "the payload"),
        topic=_check(schema, o.topic_column, (StringType,), "topicColumn")
        if o.topic_column
        else None,
        keys=o.key_columns,
        max_deliveries=_check(schema, md, _INTS, "max deliveries") if md else None,
        expires_at=_check(schema, exp, _TIMES, "the expiry time") if exp else None,
        message_key=_check(schema, message_key, (StringType,), "the message key")
        if message_key
        else None,
        headers=_headers_type(schema, headers) if headers else None,
    )
