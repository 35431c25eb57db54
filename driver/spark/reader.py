"""The Spark reader: a topic's messages, buckets split among partitions, each
bucket read page by page through the broker's ScanBucket call."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from dejaq.core import headers
from dejaq.driver.admin import Admin, MessageInfo
from dejaq.driver.client import Client
from dejaq.driver.spark.options import ReadOptions

SCHEMA = (
    "id string, timestamp_ms long, state string, deliveries int, version long, payload binary,"
    " key string, headers map<string,string>"
)
ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("timestamp_ms", pa.int64()),
        ("state", pa.string()),
        ("deliveries", pa.int32()),
        ("version", pa.int64()),
        ("payload", pa.binary()),
        ("key", pa.string()),  # null: no key
        ("headers", pa.map_(pa.string(), pa.string())),  # null: none
    ]
)
MAX_DEFAULT_PARTITIONS = 16


class Buckets(InputPartition):  # type: ignore[misc]
    """The buckets ``first`` .. ``last`` (inclusive) of the topic."""

    def __init__(self, first: int, last: int) -> None:
        super().__init__((first, last))
        self.first = first
        self.last = last


def split(buckets: int, parts: int) -> list[Buckets]:
    """``buckets`` in ``parts`` contiguous ranges as even as can be."""
    parts = max(1, min(parts, buckets))
    edges = [buckets * k // parts for k in range(parts + 1)]
    return [Buckets(edges[k], edges[k + 1] - 1) for k in range(parts)]


def to_arrow(found: Sequence[MessageInfo], payloads: bool) -> pa.RecordBatch:
    msgs = [i.message for i in found]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.id for m in msgs], pa.string()),
            pa.array([m.timestamp for m in msgs], pa.int64()),
            pa.array([i.state for i in found], pa.string()),
            pa.array([m.deliveries for m in msgs], pa.int32()),
            pa.array([m.version for m in msgs], pa.int64()),
            pa.array([m.payload if payloads else None for m in msgs], pa.binary()),
            pa.array([m.key or None for m in msgs], pa.string()),
            pa.array([_pairs(m.headers) for m in msgs], ARROW_SCHEMA.field("headers").type),
        ],
        schema=ARROW_SCHEMA,
    )


def _pairs(encoded: bytes) -> list[tuple[str, str]] | None:
    """A message's stored headers as map entries; None when it has none."""
    return list(headers.decode(encoded).items()) if encoded else None


class DejaqReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: ReadOptions, buckets: int) -> None:
        self.options = options
        self.buckets = buckets

    def partitions(self) -> list[Buckets]:
        parts = self.options.partitions or min(self.buckets, MAX_DEFAULT_PARTITIONS)
        return split(self.buckets, parts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Buckets)
        o = self.options
        loop = asyncio.new_event_loop()
        client = Client(o.broker)
        admin = Admin(client)
        try:
            for bucket in range(partition.first, partition.last + 1):
                after: str | None = ""
                while after is not None:
                    page = loop.run_until_complete(
                        admin.scan_bucket(o.topic, bucket, after, o.page_size, o.states, o.payloads)
                    )
                    if page.messages:
                        yield to_arrow(page.messages, o.payloads)
                    after = page.after_id
        finally:
            loop.run_until_complete(client.close())
            loop.close()
