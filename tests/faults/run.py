"""One randomized fault run on a 3-broker etcd cluster over Redis, PostgreSQL or
one SQLite file.

Everything the run breaks is its own: a redis-server with an fsync'd AOF (or a
PostgreSQL cluster, or a SQLite file, which has no server to restart), an
etcd, three brokers on fixed ports. Three consumer
processes and two producer processes use the public driver with the whole
broker list. For ``window_s`` seconds the harness injects faults one after
another (each kind at least once, in a seeded random order, then more drawn
at random), the producers stop at the end of the window, and the run drains
until every acknowledged message is acked (or ``drain_s`` passes). The
journals then go to the checker.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dejaq.core.clock import now_ms
from dejaq.core.errors import NotFound
from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from tests.etcd_server import EtcdServer
from tests.faults.checker import Report, check
from tests.faults.faults import CLOCK_STEPS, KINDS
from tests.faults.journal import Journal, read_all
from tests.faults.processes import Broker, Worker, libfaketime
from tests.faults.workers import AT_LEAST_ONCE, AT_MOST_ONCE
from tests.postgres_server import DATABASE, PostgresServer, bin_dir, require_driver
from tests.redis_server import RedisServer
from tests.servers import LocalServer, require_binary, running, temporary_root

BROKERS = 3
CONSUMERS = 3
PRODUCERS = 2
LEASE_MS = 1500
BUCKETS = 16
GAP_S = (0.5, 2.0)  # calm between two faults
POLL_S = 0.5
START_S = 60.0  # for the consumer processes to connect


@dataclass
class FaultRun:
    """The run's servers, processes, and what it injected."""

    seed: int
    backend: str
    folder: Path
    storage: LocalServer | None  # None: embedded storage (SQLite)
    storage_url: str
    etcd: LocalServer
    lease_ms: int = LEASE_MS
    brokers: list[Broker] = field(default_factory=list)
    consumers: list[Worker] = field(default_factory=list)
    producers: list[Worker] = field(default_factory=list)
    kinds: list[str] = field(default_factory=lambda: list(KINDS))  # the kinds to inject
    skipped: dict[str, str] = field(default_factory=dict)  # fault kind -> why not run

    def broker_list(self, first: int) -> str:
        """Every broker's address, starting with the ``first``-th (failover order)."""
        addresses = [b.address for b in self.brokers]
        return ",".join(addresses[first:] + addresses[:first])


@contextlib.contextmanager
def storage_server(backend: str, folder: Path) -> Iterator[tuple[LocalServer | None, str]]:
    """A storage server of the run's own (it will be restarted), and its URL;
    for SQLite no server, a file in ``folder``."""
    if backend == "sqlite":
        yield None, f"sqlite:///{folder / 'dejaq.db'}"
    elif backend == "redis":
        redis = RedisServer(
            require_binary("redis-server"), temporary_root("redis"), persistent=True
        )
        with running(redis) as server:
            yield server, server.url
    elif backend == "postgres":
        require_driver()
        with running(PostgresServer.create(bin_dir())) as pg:
            yield pg, pg.create_database(DATABASE)
    else:
        raise ValueError(f"unknown backend {backend!r}")


def fault_run(
    backend: str, seed: int, folder: Path, window_s: float, drain_s: float, kinds: list[str]
) -> tuple[FaultRun, Report]:
    rng = random.Random(seed)
    with contextlib.ExitStack() as stack:
        storage, url = stack.enter_context(storage_server(backend, folder))
        etcd = stack.enter_context(
            running(EtcdServer(require_binary("etcd"), temporary_root("etcd")))
        )
        run = FaultRun(seed, backend, folder, storage, url, etcd, kinds=kinds)
        stack.callback(_stop_all, run)
        _start_cluster(run)
        for i in range(CONSUMERS):
            args = ["consume", run.broker_list(i % BROKERS), str(run.lease_ms)]
            run.consumers.append(Worker(f"c{i}", args, folder).start())
        for i in range(PRODUCERS):
            args = ["produce", run.broker_list(i % BROKERS), str(seed * 10 + i), str(window_s)]
            run.producers.append(Worker(f"p{i}", args, folder).start())
        _wait_ready(run)
        _inject(run, rng, window_s)
        for p in run.producers:
            code = p.wait(window_s + drain_s)
            if code is None:
                unanswered = _unanswered(run.folder / f"{p.name}.jsonl")
                raise AssertionError(
                    f"producer {p.name} did not end; {unanswered} sends unanswered; its tasks:\n"
                    + p.dump_tasks()
                )
            assert code == 0, f"producer {p.name} ended with {code}:\n{p.log_tail()}"
        report = _drain(run, drain_s)
        for c in run.consumers:
            code = c.stop()
            assert code == 0, f"consumer {c.name} ended with {code}:\n{c.log_tail()}"
        return run, report


def _start_cluster(run: FaultRun) -> None:
    faketime = libfaketime()
    if faketime is None:
        for kind in CLOCK_STEPS:
            run.skipped[kind] = "faketime is not installed"
    if run.storage is None:
        run.skipped["restart_storage"] = "embedded storage has no server"
    cluster = f"faults-{uuid.uuid4().hex[:6]}"
    for i in range(BROKERS):
        broker = Broker(f"b{i}", run.storage_url, _etcd_url(run), cluster, run.folder)
        broker.faketime = faketime
        run.brokers.append(broker)
        broker.start()
    asyncio.run(_create_topics(run.broker_list(0)))


def _etcd_url(run: FaultRun) -> str:
    assert isinstance(run.etcd, EtcdServer)
    return run.etcd.url


async def _create_topics(brokers: str) -> None:
    async with Client(brokers) as client:
        admin = Admin(client)
        await admin.create_topic(AT_LEAST_ONCE, TopicSettings(buckets=BUCKETS, lease_ms=LEASE_MS))
        await admin.create_topic(AT_MOST_ONCE, TopicSettings(buckets=BUCKETS, max_deliveries=1))


def _inject(run: FaultRun, rng: random.Random, window_s: float) -> None:
    """Faults one after another until the window ends and every kind ran: each
    kind first (in a seeded order), then kinds drawn at random."""
    kinds = [k for k in run.kinds if k not in run.skipped]
    plan = rng.sample(kinds, len(kinds))
    journal = Journal(run.folder / "harness.jsonl")
    deadline = time.monotonic() + window_s
    try:
        while plan or time.monotonic() < deadline:
            time.sleep(rng.uniform(*GAP_S))  # calm between faults
            kind = plan.pop(0) if plan else rng.choice(kinds)
            start = now_ms()
            target = KINDS[kind](run, rng)
            journal.write("fault", kind=kind, target=target, start=start, end=now_ms())
    finally:
        journal.close()


def _wait_ready(run: FaultRun) -> None:
    """Until every consumer process has its streams open (faults come after)."""
    deadline = time.monotonic() + START_S
    names = {c.name for c in run.consumers}
    while {r["consumer"] for r in read_all(run.folder, "c*.jsonl") if r["k"] == "ready"} != names:
        for c in run.consumers:
            assert c.wait(0) is None, f"consumer {c.name} ended at start:\n{c.log_tail()}"
        assert time.monotonic() < deadline, "the consumers did not start"
        time.sleep(POLL_S)  # polling a condition under a deadline


def _drain(run: FaultRun, drain_s: float) -> Report:
    """Wait until every acknowledged at-least-once message was delivered and
    acked; the report then, or at the deadline."""
    deadline = time.monotonic() + drain_s
    while True:
        report = check(read_all(run.folder))
        if report.never_acked:  # an ack may have been applied, its answer lost
            report = check(read_all(run.folder), asyncio.run(_gone(run, report.never_acked)))
        if (not report.lost and not report.never_acked) or time.monotonic() > deadline:
            return report
        time.sleep(POLL_S)  # polling a condition under a deadline


async def _gone(run: FaultRun, ids: list[str]) -> set[str]:
    """Which of ``ids`` the at-least-once topic no longer holds."""
    gone = set()
    async with Client(run.broker_list(0)) as client:
        admin = Admin(client)
        for mid in ids:
            try:
                await admin.get(AT_LEAST_ONCE, mid)
            except NotFound:
                gone.add(mid)
    return gone


def _unanswered(journal: Path) -> int:
    sent = {
        (r["topic"], r["id"]) for r in read_all(journal.parent, journal.name) if r["k"] == "sent"
    }
    return sum(
        1
        for r in read_all(journal.parent, journal.name)
        if r["k"] == "send" and (r["topic"], r["id"]) not in sent
    )


def _stop_all(run: FaultRun) -> None:
    for w in (*run.producers, *run.consumers):
        w.stop()
    for b in run.brokers:
        b.stop()
