"""The Spark data source ``dejaq`` (``pip install 'dejaq-timeline[spark]'``).

from dejaq.driver.spark import register
register(spark)  # then df.write.format("dejaq")... / spark.read.format("dejaq")...
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from dejaq.driver.spark.source import DejaqDataSource


def register(spark: SparkSession) -> None:
    """Make ``format("dejaq")`` known to ``spark``."""
    spark.dataSource.register(DejaqDataSource)


__all__ = ["DejaqDataSource", "register"]
