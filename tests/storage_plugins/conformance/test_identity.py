"""The storage identity: one per store, the same for every instance opened on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dejaq.storage_plugins import Storage, storage_from_url
from tests.storage_plugins.conftest import BACKENDS, SHARED


async def test_a_storage_has_a_stable_identity(storage: Storage) -> None:
    first = await storage.identity()
    assert first
    assert await storage.identity() == first


async def test_two_instances_on_one_store_read_one_identity(
    two_storages: tuple[Storage, Storage],
) -> None:
    a, b = two_storages
    assert await a.identity() == await b.identity()
    assert a.shared and b.shared


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_separate_stores_have_different_identities(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # Given two stores of their own (two memory:// brokers, two SQLite files)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    urls = [BACKENDS[backend](request, tmp_path / d) for d in ("a", "b")]
    stores = [storage_from_url(u) for u in urls]
    for s in stores:
        await s.open()
    try:
        # Then their identities differ
        assert await stores[0].identity() != await stores[1].identity()
    finally:
        for s in stores:
            await s.close()


async def test_an_identity_survives_reopening(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dejaq.db'}"
    first = storage_from_url(url)
    await first.open()
    identity = await first.identity()
    await first.close()
    again = storage_from_url(url)
    await again.open()
    try:
        assert await again.identity() == identity
    finally:
        await again.close()


def test_memory_is_the_one_store_a_cluster_cannot_share() -> None:
    assert not storage_from_url("memory://").shared
    assert "memory" not in SHARED
