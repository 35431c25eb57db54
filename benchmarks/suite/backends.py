"""Storage backends for the broker under test: a URL per name, servers started here.

``memory`` and ``sqlite`` need nothing; ``redis``, ``redis-cluster`` (3
masters, 3 replicas) and ``postgres`` start throwaway servers from the local
binaries with the helpers in ``tests/`` (``redis_server.py``,
``redis_cluster.py``, ``postgres_server.py``: loopback only, temporary folders,
PostgreSQL as an unprivileged user). A backend that cannot run raises
``Unavailable`` with the reason, which the run prints and records: skipped
on a developer's machine, a failure under ``CI=true`` (as in the tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("memory", "sqlite", "redis", "redis-cluster", "postgres")
RIVAL = "poller"  # the hand-rolled Redis sorted-set queue, run as a backend of its own


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


class Unavailable(RuntimeError):
    """This backend cannot run here; the message says why."""


@dataclass(frozen=True)
class Store:
    """A backend's storage URL and its server's process (None: the storage runs
    inside the broker), whose CPU a step reports beside the broker's."""

    url: str
    pid: int | None = None
    # A cluster's nodes, each (name, pid, port): their CPU, commands and keys
    # are reported per node, masters' apart (``probes.ClusterNodes``).
    nodes: tuple[tuple[str, int, int], ...] = ()
    cluster: Any = None  # the Redis Cluster itself (tests/redis_cluster.py), for its faults


def _tests_helpers() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # for tests.redis_server, tests.postgres_server


def _postgres_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return debian[-1].parent if debian else None


@contextlib.asynccontextmanager
async def redis_store() -> AsyncIterator[Store]:
    """A fresh ``redis-server`` (no persistence) on a free loopback port."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise Unavailable("redis-server is not installed (not on PATH)")
    try:
        _tests_helpers()
        from tests.redis_server import RedisServer  # type: ignore[import-not-found]
    except ImportError as exc:
        raise Unavailable(f"cannot import the Redis helpers: {exc}") from exc
    server = RedisServer(binary, Path(tempfile.mkdtemp(prefix="dejaq-bench-redis-")))
    try:
        await asyncio.to_thread(server.start)
    except RuntimeError as exc:
        shutil.rmtree(server.root, ignore_errors=True)
        raise Unavailable(str(exc).splitlines()[0]) from exc
    try:
        yield Store(server.url, server.process.pid if server.process else None)
    finally:
        await asyncio.to_thread(server.kill)
        shutil.rmtree(server.root, ignore_errors=True)


@contextlib.asynccontextmanager
async def redis_cluster_store() -> AsyncIterator[Store]:
    """A fresh Redis Cluster (3 masters, 3 replicas, no persistence) on loopback."""
    binary, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if binary is None or cli is None:
        raise Unavailable("redis-server or redis-cli is not installed (not on PATH)")
    try:
        _tests_helpers()
        from tests.redis_cluster import RedisCluster  # type: ignore[import-not-found]
    except ImportError as exc:
        raise Unavailable(f"cannot import the Redis Cluster helpers: {exc}") from exc
    cluster = RedisCluster(binary, cli, Path(tempfile.mkdtemp(prefix="dejaq-bench-rcluster-")))
    try:
        await asyncio.to_thread(cluster.start)
    except RuntimeError as exc:
        await asyncio.to_thread(cluster.destroy)
        raise Unavailable(str(exc).splitlines()[0]) from exc
    try:
        masters = {n.port for n in cluster.masters()}
        nodes = tuple(
            (f"{'master' if n.port in masters else 'replica'}:{n.port}", n.process.pid, n.port)
            for n in cluster.nodes
            if n.process is not None
        )
        yield Store(cluster.url, None, nodes, cluster)
    finally:
        await asyncio.to_thread(cluster.destroy)


@contextlib.asynccontextmanager
async def postgres_store() -> AsyncIterator[Store]:
    """A fresh PostgreSQL cluster (fsync off, as the tests run it) on a free port."""
    bin_dir = _postgres_bin()
    if bin_dir is None:
        raise Unavailable("PostgreSQL binaries (pg_ctl) are not installed")
    try:
        _tests_helpers()
        from tests.postgres_server import (  # type: ignore[import-not-found]
            DATABASE,
            PostgresServer,
        )
    except ImportError as exc:
        raise Unavailable(f"cannot import the PostgreSQL helpers: {exc}") from exc
    try:
        server = await asyncio.to_thread(PostgresServer.create, bin_dir)
    except (RuntimeError, OSError) as exc:
        raise Unavailable(f"initdb failed: {str(exc).splitlines()[0]}") from exc
    try:
        await asyncio.to_thread(server.start)
        url = await asyncio.to_thread(server.create_database, DATABASE)
    except Exception as exc:
        await asyncio.to_thread(server.destroy)
        raise Unavailable(f"postgres did not start: {str(exc).splitlines()[0]}") from exc
    try:
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
        yield Store(url, postmaster)
    finally:
        await asyncio.to_thread(server.destroy)


@contextlib.asynccontextmanager
async def store(name: str, workdir: str) -> AsyncIterator[Store]:
    """Backend ``name``'s storage, with its server running while the block runs."""
    if name == "memory":
        yield Store("memory://")
    elif name == "sqlite":
        yield Store(f"sqlite:///{workdir}/bench.db")  # workdir is absolute: sqlite:////tmp/...
    elif name == "redis":
        async with redis_store() as served:
            yield served
    elif name == "redis-cluster":
        async with redis_cluster_store() as served:
            yield served
    elif name == "postgres":
        async with postgres_store() as served:
            yield served
    else:
        raise Unavailable(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
