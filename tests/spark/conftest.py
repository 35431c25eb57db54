"""Fixtures of the Spark stories: one real SparkSession (``local[2]``, a task
tried up to 4 times) for the whole session, and real broker processes.

Java and pyspark missing on a developer's machine skip these tests; under
``CI=true`` they fail (scripts/servers.sh installs Java, the dev extra pyspark).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.conftest import start_broker  # noqa: F401 - fixture
from tests.servers import unavailable

# A task may fail 3 times before the job does (local[N, maxFailures]).
MASTER = "local[2,4]"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        unavailable("java is not installed (Spark needs Java 17)")
    try:
        from pyspark.sql import SparkSession

        from dejaq.driver.spark import register
    except ImportError as exc:
        unavailable(f"pyspark is not installed: {exc}")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers import dejaq from this venv
    session = (
        SparkSession.builder.master(MASTER)
        .appName("dejaq tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "5000")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A memory:// broker shared by the session's Spark stories."""
    folder = tmp_path_factory.mktemp("spark-broker")
    b = BrokerProcess("memory://", folder / "broker.log").start()
    try:
        yield b
    finally:
        assert b.stop() == 0, b.log_tail()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")[:60]
    return f"{base}-{uuid.uuid4().hex[:8]}"


def create_topic(address: str, name: str, **settings: Any) -> str:
    async def create() -> None:
        async with Client(address) as client:
            await Admin(client).create_topic(name, TopicSettings(**settings))

    asyncio.run(create())
    return name
