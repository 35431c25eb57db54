"""The ``storage`` fixture: every conformance test runs once per backend.

Each backend is built lazily from a URL, so a backend whose server is missing
skips only its own cases. To add a served backend (Redis, PostgreSQL, ...):
write a session fixture that starts the server on loopback after
``tests.servers.require_binary("redis-server")`` (skipped locally, failed
under ``CI=true``), then add a URL factory here that asks for it with
``request.getfixturevalue(...)`` and flushes it for the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from dejaq.storage_plugins import Storage, storage_from_url

UrlFactory = Callable[[pytest.FixtureRequest, Path], str]


def _memory(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://"


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'dejaq.db'}"


BACKENDS: dict[str, UrlFactory] = {
    "memory": _memory,
    "sqlite": _sqlite,
}


@pytest.fixture(params=list(BACKENDS))
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    """An opened, empty backend; closed after the test."""
    backend = storage_from_url(BACKENDS[request.param](request, tmp_path))
    await backend.open()
    try:
        yield backend
    finally:
        await backend.close()
