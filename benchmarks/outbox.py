"""The transactional outbox: relay lag by rate, one relay's drain rate, and the
application's own cost of the outbox row.

    python benchmarks/outbox.py                       # 1k and 10k rows/s, 10 s each
    python benchmarks/outbox.py --rates 1000 --seconds 20 --drain-rows 20000

A fresh PostgreSQL (``tests/postgres_server.py``: fsync off) holds the
application's database with the outbox installed; a ``dejaq broker`` process
on ``memory://`` takes the messages; the relay is a ``dejaq outbox relay``
process of its own, through the public driver, as a user runs it.

- **Lag by rate.** ``--writers`` processes (psycopg) write rows due at once,
  the rate shared, each in transactions of ``rate / writers / 1000`` rows (at
  least 1) paced evenly; a consumer here receives them, after a warm-up of a
  second whose rows are not counted. Two figures: the
  relay's own histogram ``dejaq_outbox_relay_lag_seconds`` (from the row's
  commit, the server keeping commit times, to dejaq accepting it; p50/p99
  read from its buckets after the warm-up, so each is the upper edge of its
  bucket), and the lag from the writer's commit returning
  to the consumer receiving the message, exact, an upper bound of the relay's
  (it adds dispatch and delivery).
- **Drain.** ``--drain-rows`` rows committed with no relay running, due in an
  hour; then a relay starts and the time until the outbox is empty is taken:
  rows a second one relay drains (its start included).
- **The relay in the broker** (``--in-broker``): the broker relays the outbox
  itself (``dejaq broker --outbox``), straight into its handlers, and no relay
  process runs; the lag by rate only (that relay never stops, so there is no
  drain to time, and it would relay the insert cost's rows as they are timed).
- **Insert cost.** Transactions that insert an order row, with and without an
  outbox row beside it, alternating one by one: the median time of each from
  ``BEGIN`` to the commit returning, and their difference.

Figures print and go to benchmarks/results/outbox.json (``--name``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
from suite.arrivals import Arrivals
from suite.backends import ROOT
from suite.broker import BrokerProcess, broker, dejaq_command, free_port
from suite.procstat import load_average
from suite.record import save_record

import dejaq.outbox
from dejaq.driver import Admin, Client, Consumer

WARMUP_S = 1.0
DRAIN_TIMEOUT_S = 120.0
COST_EACH = 2000  # transactions of each kind, alternating one by one


@contextlib.contextmanager
def app_database() -> Any:
    """A fresh PostgreSQL (the tests' helper: fsync off) keeping commit times, so
    the relay's lag counts from each row's commit; its URL."""
    sys.path.insert(0, str(ROOT))
    from tests.postgres_server import PostgresServer, bin_dir
    from tests.servers import running

    with running(PostgresServer.create(bin_dir(), track_commit_timestamp="on")) as server:
        yield server.create_database("app")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


def waiting(url: str) -> int:
    return dejaq.outbox.status(url, limit=0).waiting


def wait_gone(url: str, timeout_s: float) -> None:
    """Until no row waits in the outbox."""
    deadline = time.monotonic() + timeout_s
    while waiting(url):
        if time.monotonic() > deadline:
            raise RuntimeError("rows still wait in the outbox")
        time.sleep(0.01)


@contextlib.contextmanager
def relay_process(url: str, address: str, metrics: str, log: Path) -> Any:
    with log.open("ab") as errors:
        proc = subprocess.Popen(
            [*dejaq_command(), "outbox", "relay", url, "--broker", address, "--metrics", metrics],
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def histogram(metrics: str) -> list[tuple[float, float]]:
    """The relay's lag histogram: (upper edge in seconds, cumulative count);
    waits for a relay process just started to serve its metrics."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as answer:
                text = answer.read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    found = []
    for line in text.splitlines():
        if line.startswith("dejaq_outbox_relay_lag_seconds_bucket{"):
            edge = line.split('le="', 1)[1].split('"', 1)[0]
            found.append((float(edge), float(line.rsplit(" ", 1)[1])))
    return found


def bucket_counts(
    before: list[tuple[float, float]], after: list[tuple[float, float]]
) -> dict[str, float]:
    """Rows observed in each bucket between two scrapes, by upper edge in ms."""
    earlier = dict(before)
    found, below = {}, 0.0
    for edge, cumulative in after:
        n = cumulative - earlier.get(edge, 0.0)
        found[f"{edge * 1000:g}"] = n - below
        below = n
    return found


def bucket_quantile(
    before: list[tuple[float, float]], after: list[tuple[float, float]], q: float
) -> float:
    """The upper edge of the bucket holding quantile ``q`` of what was observed
    between two scrapes."""
    earlier = dict(before)  # empty before the relay's first row
    counts = [(edge, a - earlier.get(edge, 0.0)) for edge, a in after]
    total = counts[-1][1]
    for edge, cumulative in counts:
        if cumulative >= q * total:
            return edge
    return float("inf")


def writer(url: str, topic: str, rate: float, seconds: float, tag: str) -> dict[str, float]:
    """One writer process: rows due at once, ``rows_a_tx`` a transaction, paced
    to ``rate`` rows a second; each row's id and when its commit returned."""
    per_tx = rows_a_tx(rate)
    commits: dict[str, float] = {}
    n = 0
    with psycopg.connect(url) as conn:
        start = time.monotonic()
        while (now := time.monotonic()) - start < seconds:
            target = start + n / rate
            if target > now:
                time.sleep(target - now)
            ids = []
            with conn.transaction():
                for _ in range(per_tx):
                    ids.append(dejaq.outbox.schedule(conn, topic, b"x" * 100, id=f"{tag}-{n}"))
                    n += 1
            done = time.time()
            for i in ids:
                commits[i] = done
    return commits


def rows_a_tx(rate: float) -> int:
    return max(1, int(rate) // 1000)


async def one_rate(
    url: str, address: str, metrics: str, rate: int, seconds: float, writers: int
) -> dict[str, Any]:
    topic = f"outbox-{rate}"
    arrivals = Arrivals()
    received = arrivals.at
    async with Client(address) as client:
        await Admin(client).create_topic(topic)
        async with Consumer(client, topic) as consumer:

            async def consume() -> None:
                async for delivery in consumer:
                    arrivals.arrived(delivery.id, time.time())
                    await delivery.ack()

            consuming = asyncio.create_task(consume())
            # Warm up: the relay's stream to the topic opens on its first rows.
            warm = await asyncio.to_thread(writer, url, topic, 200, WARMUP_S, "warm")
            if await arrivals.wait_for(warm, 60):
                raise RuntimeError("the warm-up's messages did not all arrive in 60 s")
            # A row is delivered before the relay deletes it and observes its
            # lag: the warm-up's lags are all in once its rows are gone.
            await asyncio.to_thread(wait_gone, url, 60)
            before = await asyncio.to_thread(histogram, metrics)
            loop = asyncio.get_running_loop()
            pool = ProcessPoolExecutor(writers, mp_context=multiprocessing.get_context("spawn"))
            try:
                parts = await asyncio.gather(
                    *(
                        loop.run_in_executor(
                            pool, writer, url, topic, rate / writers, seconds, f"w{w}"
                        )
                        for w in range(writers)
                    )
                )
            finally:
                # Joined in a thread: the consumer keeps receiving meanwhile.
                await asyncio.to_thread(pool.shutdown)
            commits = {i: t for part in parts for i, t in part.items()}
            await arrivals.wait_for(commits, 60)
            consuming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consuming
        # The relay observes a row's lag once it deleted it, after its delivery.
        await asyncio.to_thread(wait_gone, url, 60)
        after = await asyncio.to_thread(histogram, metrics)
    lags = [(received[i] - commits[i]) * 1000 for i in commits if i in received]
    missing = sorted(set(commits) - received.keys())
    if missing:
        left = dejaq.outbox.status(url)
        async with Client(address) as client:
            states = [(i, (await Admin(client).get(topic, i)).state) for i in missing[:5]]
        print(
            f"not received: {len(missing)} {states};"
            f" outbox waiting {left.waiting}, parked {left.parked}"
        )
    return {
        "rate": rate,
        "writers": writers,
        "rows_a_transaction": rows_a_tx(rate / writers),
        "written": len(commits),
        "received": sum(1 for i in commits if i in received),
        "written_per_s": round(len(commits) / seconds),
        "relay_lag_buckets": bucket_counts(before, after),
        "relay_lag_p50_ms_bucket": bucket_quantile(before, after, 0.5) * 1000,
        "relay_lag_p99_ms_bucket": bucket_quantile(before, after, 0.99) * 1000,
        "commit_to_delivery_p50_ms": round(percentile(lags, 0.5), 2),
        "commit_to_delivery_p99_ms": round(percentile(lags, 0.99), 2),
        "commit_to_delivery_max_ms": round(max(lags, default=float("nan")), 2),
    }


async def drain(url: str, address: str, rows: int, log: Path) -> dict[str, Any]:
    topic = "outbox-drain"
    async with Client(address) as client:
        await Admin(client).create_topic(topic)
    with psycopg.connect(url) as conn:
        for start in range(0, rows, 1000):
            with conn.transaction():
                for i in range(start, min(rows, start + 1000)):
                    dejaq.outbox.schedule(conn, topic, b"x" * 100, delay_ms=3_600_000, id=f"d-{i}")
    began = time.monotonic()
    with relay_process(url, address, f"127.0.0.1:{free_port()}", log):
        while waiting(url):
            if time.monotonic() - began > DRAIN_TIMEOUT_S:
                raise RuntimeError("the relay did not drain the outbox in time")
            await asyncio.sleep(0.01)
        took = time.monotonic() - began
    return {"rows": rows, "seconds": round(took, 2), "rows_per_s": round(rows / took)}


def insert_cost(url: str) -> dict[str, Any]:
    timings: dict[str, list[float]] = {"without": [], "with": []}
    n = 0
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, body text)")
        conn.commit()
        for _ in range(2 * COST_EACH):
            n += 1
            kind = "with" if n % 2 else "without"
            started = time.perf_counter()
            with conn.transaction():
                conn.execute("INSERT INTO orders VALUES (%s, 'an order')", (f"o-{n}",))
                if kind == "with":
                    dejaq.outbox.schedule(conn, "cost", b"x" * 100, delay_ms=1_800_000, id=f"c-{n}")
            timings[kind].append((time.perf_counter() - started) * 1e6)
    without = statistics.median(timings["without"])
    with_row = statistics.median(timings["with"])
    return {
        "transactions_each": len(timings["with"]),
        "median_us_without": round(without, 1),
        "median_us_with": round(with_row, 1),
        "extra_us": round(with_row - without, 1),
    }


async def run_all(
    url: str, proc: BrokerProcess, args: argparse.Namespace, log: Path, results: dict[str, Any]
) -> None:
    address = proc.address
    if args.in_broker:
        # The broker's own relay, its lag histogram among the broker's metrics.
        metrics = proc.metrics
        relaying: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    else:
        metrics = f"127.0.0.1:{free_port()}"
        relaying = relay_process(url, address, metrics, log)
    with relaying:
        results["lag"] = [
            await one_rate(url, address, metrics, rate, args.seconds, args.writers)
            for rate in args.rates
        ]
    for row in results["lag"]:
        print(
            f"{row['rate']:>6}/s ({row['rows_a_transaction']} a tx,"
            f" {row['written_per_s']}/s written):"
            f" relay lag p50 <= {row['relay_lag_p50_ms_bucket']:g} ms,"
            f" p99 <= {row['relay_lag_p99_ms_bucket']:g} ms (bucket edges);"
            f" commit to delivery p50 {row['commit_to_delivery_p50_ms']} ms,"
            f" p99 {row['commit_to_delivery_p99_ms']} ms"
        )
    if args.in_broker:
        return
    results["drain"] = await drain(url, address, args.drain_rows, log)
    print(
        f"drain: {results['drain']['rows']} rows in {results['drain']['seconds']} s,"
        f" {results['drain']['rows_per_s']} rows/s"
    )
    results["insert_cost"] = await asyncio.to_thread(insert_cost, url)
    cost = results["insert_cost"]
    print(
        f"insert cost: {cost['median_us_without']} us a transaction without the outbox row,"
        f" {cost['median_us_with']} us with it: +{cost['extra_us']} us"
    )


async def main(args: argparse.Namespace) -> None:
    load_before = load_average()
    results: dict[str, Any] = {}
    log = Path(os.environ.get("TMPDIR", "/tmp")) / "dejaq-outbox-relay.log"
    with app_database() as url:
        dejaq.outbox.install(url)
        env = {"DEJAQ_OUTBOX": url} if args.in_broker else None
        async with broker("memory://", http_api=False, env=env) as proc:
            await run_all(url, proc, args, log, results)
    config = {
        "relay": "in the broker" if args.in_broker else "a process of its own",
        "rates": args.rates,
        "seconds": args.seconds,
        "writers": args.writers,
        "drain_rows": args.drain_rows,
    }
    save_record(args.name, config, results, load_before)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rates", type=int, nargs="+", default=[1000, 10_000], help="rows a second")
    p.add_argument("--seconds", type=float, default=10.0, help="each rate's run")
    p.add_argument("--writers", type=int, default=2, help="writer processes, the rate shared")
    p.add_argument("--drain-rows", type=int, default=50_000, help="rows the drain starts with")
    p.add_argument(
        "--in-broker",
        action="store_true",
        help="the broker relays (dejaq broker --outbox), no relay process; no drain",
    )
    p.add_argument("--name", default="outbox", help="the record's name in benchmarks/results/")
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
