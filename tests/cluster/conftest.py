"""Fixtures for cluster stories: real etcd, real broker processes, one shared SQLite file.

Every test gets a cluster name of its own (its etcd keys live under
``/dejaq/<name>/``) and a fresh SQLite file, so tests share the session's etcd
without seeing each other. Brokers are stopped (SIGTERM) after the test.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.support import Cluster
from tests.etcd_server import EtcdServer


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest,
    etcd_server: EtcdServer,
    tmp_path: Path,
) -> Iterator[Cluster]:
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")[:40]
    c = Cluster(f"{name}-{uuid.uuid4().hex[:6]}", etcd_server.url, tmp_path)
    try:
        yield c
    finally:
        codes = c.stop_all()
    # SIGTERM must stop a broker cleanly (0); -9 is a broker the test killed.
    assert all(code in (0, -9) for code in codes.values()), f"broker exit codes: {codes}"
