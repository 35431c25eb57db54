"""The data source's options, read once from Spark's option map.

Keys are case-insensitive (Spark passes them either way); an unknown key is
refused by name, so a typo (``keyColumn``) never silently does nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dejaq.core.errors import InvalidArgument
from dejaq.core.model import OnDuplicate

STATES = ("waiting", "due", "leased", "dead")


@dataclass(frozen=True)
class WriteOptions:
    """``df.write.format("dejaq")`` options (README: Bulk scheduling with Spark)."""

    broker: str
    topic: str | None = None
    topic_column: str | None = None
    id_column: str = "id"
    time_column: str | None = None  # None: timestamp_ms, else timestamp
    payload_column: str = "payload"
    key_columns: tuple[str, ...] = ()
    max_deliveries_column: str | None = None  # None: max_deliveries when present
    expires_at_column: str | None = None  # None: expires_at_ms when present
    message_key_column: str | None = None  # None: key when present
    headers_column: str | None = None  # None: headers when present
    batch_size: int = 5000  # messages per Produce frame
    max_in_flight: int = 8  # frames awaiting their answer, per task and topic
    rejects_path: str | None = None
    max_rejects: int | None = None  # None: no limit
    summary_path: str | None = None  # the commit's totals as JSON (dejaq spark schedule)
    retry_timeout_s: float = 60.0
    on_duplicate: str = "keep"  # a waiting id: keep, replace or extend it


@dataclass(frozen=True)
class ReadOptions:
    """``spark.read.format("dejaq")`` options."""

    broker: str
    topic: str
    states: tuple[str, ...] = ()  # empty: every state
    partitions: int | None = None  # None: min(buckets, 16)
    page_size: int = 5000
    payloads: bool = True


_WRITE_KEYS = {
    "broker": "broker",
    "topic": "topic",
    "topiccolumn": "topic_column",
    "idcolumn": "id_column",
    "timecolumn": "time_column",
    "payloadcolumn": "payload_column",
    "keycolumns": "key_columns",
    "maxdeliveriescolumn": "max_deliveries_column",
    "expiresatcolumn": "expires_at_column",
    "messagekeycolumn": "message_key_column",
    "headerscolumn": "headers_column",
    "batchsize": "batch_size",
    "maxinflight": "max_in_flight",
    "rejectspath": "rejects_path",
    "maxrejects": "max_rejects",
    "summarypath": "summary_path",
    "retrytimeouts": "retry_timeout_s",
    "onduplicate": "on_duplicate",
}
_READ_KEYS = {
    "broker": "broker",
    "topic": "topic",
    "states": "states",
    "partitions": "partitions",
    "pagesize": "page_size",
    "payloads": "payloads",
}
# Shown in errors with their documented spelling.
_SPELLING = {
    "topiccolumn": "topicColumn",
    "idcolumn": "idColumn",
    "timecolumn": "timeColumn",
    "payloadcolumn": "payloadColumn",
    "keycolumns": "keyColumns",
    "maxdeliveriescolumn": "maxDeliveriesColumn",
    "expiresatcolumn": "expiresAtColumn",
    "messagekeycolumn": "messageKeyColumn",
    "headerscolumn": "headersColumn",
    "batchsize": "batchSize",
    "maxinflight": "maxInFlight",
    "rejectspath": "rejectsPath",
    "maxrejects": "maxRejects",
    "summarypath": "summaryPath",
    "retrytimeouts": "retryTimeoutS",
    "onduplicate": "onDuplicate",
    "pagesize": "pageSize",
}


def _named(raw: Mapping[str, str], keys: Mapping[str, str]) -> dict[str, str]:
    """Option values by field name; ``path`` (from ``save(path)``) is refused too."""
    out: dict[str, str] = {}
    for key, value in raw.items():
        field = keys.get(key.lower())
        if field is None:
            known = ", ".join(sorted(_SPELLING.get(k, k) for k in keys))
            raise InvalidArgument(f"dejaq: unknown option {key!r}; the options are: {known}")
        out[field] = value
    if not out.get("broker", "").strip():
        raise InvalidArgument("dejaq: option 'broker' is required (HOST:PORT[,HOST:PORT...])")
    return out


def _positive(name: str, text: str, minimum: int = 1) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"dejaq: option {name!r} must be an integer, not {text!r}") from None
    if value < minimum:
        raise InvalidArgument(f"dejaq: option {name!r} must be at least {minimum}, not {value}")
    return value


def _columns(text: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(",") if c.strip())


def write_options(raw: Mapping[str, str]) -> WriteOptions:
    v = _named(raw, _WRITE_KEYS)
    topic, topic_column = v.get("topic") or None, v.get("topic_column") or None
    if (topic is None) == (topic_column is None):
        raise InvalidArgument("dejaq: give exactly one of the options 'topic' and 'topicColumn'")
    return WriteOptions(
        broker=v["broker"],
        topic=topic,
        topic_column=topic_column,
        id_column=v.get("id_column") or "id",
        time_column=v.get("time_column") or None,
        payload_column=v.get("payload_column") or "payload",
        key_columns=_columns(v.get("key_columns", "")),
        max_deliveries_column=v.get("max_deliveries_column") or None,
        expires_at_column=v.get("expires_at_column") or None,
        message_key_column=v.get("message_key_column") or None,
        headers_column=v.get("headers_column") or None,
        batch_size=_positive("batchSize", v.get("batch_size", "5000")),
        max_in_flight=_positive("maxInFlight", v.get("max_in_flight", "8")),
        rejects_path=v.get("rejects_path") or None,
        max_rejects=_positive("maxRejects", v["max_rejects"], 0) if "max_rejects" in v else None,
        summary_path=v.get("summary_path") or None,
        retry_timeout_s=float(_positive("retryTimeoutS", v.get("retry_timeout_s", "60"))),
        on_duplicate=_mode(v.get("on_duplicate", "keep")),
    )


def _mode(text: str) -> str:
    try:
        return OnDuplicate.named(text.lower()).label
    except InvalidArgument:
        raise InvalidArgument(
            f"dejaq: option 'onDuplicate' is keep, replace or extend, not {text!r}"
        ) from None


def read_options(raw: Mapping[str, str]) -> ReadOptions:
    v = _named(raw, _READ_KEYS)
    if not v.get("topic"):
        raise InvalidArgument("dejaq: option 'topic' is required to read")
    states = _columns(v.get("states", "").lower())
    unknown = sorted(set(states) - set(STATES))
    if unknown:
        raise InvalidArgument(f"dejaq: unknown states {unknown}; the states are {list(STATES)}")
    payloads = v.get("payloads", "true").lower()
    if payloads not in ("true", "false"):
        raise InvalidArgument(f"dejaq: option 'payloads' is true or false, not {payloads!r}")
    return ReadOptions(
        broker=v["broker"],
        topic=v["topic"],
        states=states,
        partitions=_positive("partitions", v["partitions"]) if "partitions" in v else None,
        page_size=_positive("pageSize", v.get("page_size", "5000")),
        payloads=payloads == "true",
    )
