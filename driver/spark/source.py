"""``DejaqDataSource``: the Spark data source named ``dejaq``.

Write: ``df.write.format("dejaq").option("broker", ...).option("topic", ...)
.mode("append").save()``. Read: ``spark.read.format("dejaq").option("broker",
...).option("topic", ...).load()``. Options: ``options``; README "Bulk
scheduling with Spark".
"""

from __future__ import annotations

import asyncio

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from dejaq.core.errors import InvalidArgument
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.spark.columns import resolve
from dejaq.driver.spark.options import read_options, write_options
from dejaq.driver.spark.reader import SCHEMA, DejaqReader
from dejaq.driver.spark.writer import DejaqWriter


async def _buckets(brokers: str, topic: str) -> int:
    """The topic's bucket count (``NotFound`` when there is no such topic)."""
    async with Client(brokers) as client:
        return (await Admin(client).describe_topic(topic)).topic.settings.buckets


class DejaqDataSource(DataSource):  # type: ignore[misc]
    """Bulk-schedules a DataFrame's rows on a dejaq timeline, and reads a
    topic's messages back for analytics."""

    @classmethod
    def name(cls) -> str:
        return "dejaq"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DejaqReader:
        o = read_options(self.options)
        return DejaqReader(o, asyncio.run(_buckets(o.broker, o.topic)))

    def writer(self, schema: StructType, overwrite: bool) -> DejaqWriter:
        if overwrite:
            raise InvalidArgument("dejaq: the timeline is appended to: use mode('append')")
        o = write_options(self.options)
        columns = resolve(schema, o)
        if o.topic is not None:
            asyncio.run(_buckets(o.broker, o.topic))  # a missing topic fails the job here
        return DejaqWriter(o, columns)
