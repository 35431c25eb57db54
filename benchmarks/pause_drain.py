"""Pausing a topic on 3 brokers: nothing delivered while paused, the backlog's drain after.

    python benchmarks/pause_drain.py                        # 5k/s, paused 5 s
    python benchmarks/pause_drain.py --rate 2000 --pause-s 3
    python benchmarks/pause_drain.py --smoke                # 1k/s, paused 1.5 s: checks, figures

etcd and a redis-server (the tests' helpers, as ``run.py``'s cluster scenario
starts them), 3 ``dejaq broker`` processes of one cluster on that Redis, one
consumer process on each broker (the driver's plain loop, ``suite/workers.py``)
and a producer process through broker 0 sending ``--rate`` messages a second,
each due ``--lead-ms`` after it is sent. After ``--warm-s`` of that steady load
the topic is paused through broker 1 (``Admin.pause_topic``, what ``dejaq topic
pause`` calls), stays paused ``--pause-s`` while the producer goes on, and is
resumed through broker 2; the load goes on ``--after-s`` more.

Figures, from the consumers' clocks unless said:

- while paused, from 100 ms after every broker describes the topic paused
  until the resume: deliveries the consumers took that a broker sent while paused
  (due later than the pause plus the send-ahead: must be 0), apart from those
  sent ahead before the pause, which a consumer holds and releases at their
  due time (``docs/architecture.md``);
- the backlog (messages due before the resume and not delivered by then): how
  long it took to drain after the resume and its drain rate, against the
  steady rate held before the pause (deliveries a second over the warm-up);
  the deliveries a second of the first 100 ms bins after the resume;
- lateness of the steady load before the pause and after the backlog cleared;
- the brokers' own split of the lateness of deliveries made after the
  resume: ``dejaq_paused_lateness_seconds`` (the pause's part) and
  ``dejaq_delivery_lateness_seconds`` (the broker's), summed over the three
  brokers' ``/metrics`` (count, mean, and the bucket bounds of p50 and p99);
- lost and early (both must be 0).

Figures print and go to ``benchmarks/results/pause_drain.json`` (``--name``).
Exit status 1 on a delivery sent while paused, an early or a lost message.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client.parser import text_string_to_metric_families
from scenarios.cluster import covered, etcd, launch_member, serving, wait_until
from suite.backends import redis_store
from suite.broker import free_port, stop
from suite.procstat import load_average
from suite.record import save_record
from suite.stats import lateness_summary
from suite.workers import Record, Worker, consumer_main, producer_main

from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.storage_plugins import storage_from_url

BROKERS = 3
TOPIC = "pause-drain"
BUCKETS = 12
TTL_S = 3  # the brokers' etcd lease, as the cluster tests and scenarios set it
# A loaded machine delays heartbeats, read as clock skew: tolerated as in the
# cluster tests (tests/cluster/support.py), so no broker stops dispatching.
SKEW_MAX_MS = 400
CONVERGE_S = 30.0
START_S = 60.0  # a broker's start on a loaded machine (three at once, joining etcd)
DRAIN_S = 30.0  # after the load's last due time, how long stragglers may take
BIN_S = 0.1
# A broker's describe reads the pause from storage a round trip before its
# dispatcher is told: deliveries are judged from this long after every broker
# describes the topic paused.
SETTLE_MS = 100
PAUSED = "dejaq_paused_lateness_seconds"
BROKERS_OWN = "dejaq_delivery_lateness_seconds"


@dataclass
class Member:
    """One ``dejaq broker`` of the cluster, with its ``/metrics``."""

    proc: asyncio.subprocess.Process
    address: str
    metrics: str


async def start_member(storage: str, etcd_url: str, log: Path) -> Member:
    metrics = f"127.0.0.1:{free_port()}"
    env = {"DEJAQ_ETCD_TTL_S": str(TTL_S), "DEJAQ_SKEW_MAX_MS": str(SKEW_MAX_MS)}
    member = await launch_member(
        storage, etcd_url, "pause-drain", log, env, ("--metrics", metrics), START_S
    )
    return Member(member.proc, member.address, metrics)


@contextlib.asynccontextmanager
async def cluster(workdir: Path) -> AsyncIterator[tuple[str, list[Member]]]:
    """Redis, etcd and 3 brokers on them, each serving, while the block runs."""
    async with redis_store() as store, etcd() as etcd_url:
        started = await asyncio.gather(
            *(
                start_member(store.url, etcd_url, workdir / f"broker-{i}.log")
                for i in range(BROKERS)
            ),
            return_exceptions=True,
        )
        members = [m for m in started if isinstance(m, Member)]
        try:
            for failed in started:
                if isinstance(failed, BaseException):
                    raise failed
            for m in members:
                await wait_until(lambda m=m: serving(m.address), CONVERGE_S, f"{m.address} serving")
            yield store.url, members
        finally:
            await asyncio.gather(*(stop(m.proc, 5) for m in members), return_exceptions=True)


async def all_paused(members: list[Member], paused: bool) -> None:
    async def agreed() -> bool:
        for m in members:
            async with Client(m.address) as client:
                info = await Admin(client).describe_topic(TOPIC)
                if info.topic.settings.paused != paused:
                    return False
        return True

    await wait_until(agreed, CONVERGE_S, f"every broker to see the topic paused={paused}", 0.01)


def scrape(members: list[Member]) -> dict[str, dict[str, float]]:
    """The two lateness histograms of the topic, summed over the brokers:
    name -> {"le=BOUND": cumulative count, "sum": s, "count": n}."""
    out: dict[str, dict[str, float]] = {PAUSED: {}, BROKERS_OWN: {}}
    for m in members:
        with urllib.request.urlopen(f"http://{m.metrics}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name not in out:
                continue
            into = out[family.name]
            for s in family.samples:
                if s.labels.get("topic") != TOPIC:
                    continue
                if s.name.endswith("_bucket"):
                    key = f"le={s.labels['le']}"
                elif s.name.endswith("_sum"):
                    key = "sum"
                elif s.name.endswith("_count"):
                    key = "count"
                else:
                    continue
                into[key] = into.get(key, 0.0) + s.value
    return out


def histogram_split(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """count, mean and the bucket bounds holding p50 and p99 of what was
    observed between two scrapes."""
    count = after.get("count", 0.0) - before.get("count", 0.0)
    if count <= 0:
        return {"count": 0}
    total = after.get("sum", 0.0) - before.get("sum", 0.0)
    bounds = sorted(
        (float(k.removeprefix("le=")), after[k] - before.get(k, 0.0))
        for k in after
        if k.startswith("le=")
    )

    def bound_of(q: float) -> float | None:
        for bound, cumulative in bounds:
            if cumulative >= q * count:
                return None if bound == float("inf") else round(bound * 1000, 1)
        return None

    return {
        "count": int(count),
        "mean_ms": round(total / count * 1000, 1),
        "p50_at_most_ms": bound_of(0.5),
        "p99_at_most_ms": bound_of(0.99),
    }


def lateness(records: list[Record]) -> dict[str, Any]:
    values = np.array([r / 1e6 - due for r, due, _ in records], np.float64)
    early = sum(1 for r, due, _ in records if r // 1_000_000 < due)
    return lateness_summary(values, early)


@dataclass
class Times:
    """When the run did what (wall clock ms)."""

    paused_at: int = 0  # the pause as the brokers stored it
    all_paused: int = 0  # every broker describes it paused
    resumed_at: int = 0  # the resume as the brokers stored it


async def drive(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    async with cluster(workdir) as (storage, members):
        ahead_ms = storage_from_url(storage).send_ahead_ms
        addresses = [m.address for m in members]
        async with Client(addresses[0]) as client:
            await Admin(client).create_topic(TOPIC, TopicSettings(buckets=BUCKETS))
        consumers = [
            Worker(f"consumer-{i}", consumer_main, a, TOPIC) for i, a in enumerate(addresses)
        ]
        producer = Worker("producer", producer_main, "dejaq", addresses[0], 4)
        seen: list[Record] = []
        try:
            await asyncio.gather(*(w.ready() for w in [*consumers, producer]))
            await wait_until(
                lambda: covered(addresses[0], TOPIC, BROKERS, set(addresses)),
                CONVERGE_S,
                "3 consumers covering the topic",
            )
            times, sent, before = await load(args, members, consumers, producer, seen)
            after = await asyncio.to_thread(scrape, members)
        finally:
            answers = await asyncio.gather(
                *(w.stop() for w in [*consumers, producer]), return_exceptions=True
            )
            for a in answers[: len(consumers)]:
                if isinstance(a, list):
                    seen += a
    return figures(seen, times, sent, ahead_ms, before, after)


async def take(consumers: list[Worker]) -> list[Record]:
    got = await asyncio.gather(*(w.ask(("take",), 60) for w in consumers))
    return [r for part in got for r in part]


async def load(
    args: argparse.Namespace,
    members: list[Member],
    consumers: list[Worker],
    producer: Worker,
    seen: list[Record],
) -> tuple[Times, int, dict[str, dict[str, float]]]:
    """The steady load, the pause and the resume, what the consumers took
    added to ``seen``: when each happened, the messages sent, and the brokers'
    lateness histograms at the resume."""
    times = Times()
    seconds = args.warm_s + args.pause_s + args.after_s
    start_ms = int(time.time() * 1000) + 500
    steady = asyncio.create_task(
        producer.ask(
            ("steady", TOPIC, args.rate, seconds, start_ms, args.lead_ms, "p"), seconds + 60
        )
    )
    first_due_ms = start_ms + args.lead_ms
    await asyncio.sleep(max(0.0, (first_due_ms + args.warm_s * 1000) / 1000 - time.time()))
    async with Client(members[1].address) as client:
        times.paused_at = (await Admin(client).pause_topic(TOPIC)).settings.paused_at_ms
    await all_paused(members, True)
    times.all_paused = int(time.time() * 1000)
    await asyncio.sleep(max(0.0, (times.paused_at + args.pause_s * 1000) / 1000 - time.time()))
    seen += await take(consumers)
    before = await asyncio.to_thread(scrape, members)
    async with Client(members[2].address) as client:
        times.resumed_at = (await Admin(client).resume_topic(TOPIC)).settings.resumed_at_ms
    sent = (await steady)["sent"]
    last_due_ms = first_due_ms + int(seconds * 1000)
    deadline = last_due_ms / 1000 + DRAIN_S
    while len({i for _, _, i in seen}) < sent and time.time() < deadline:
        seen += await take(consumers)
        await asyncio.sleep(0.1)  # polling the consumers under a deadline
    return times, sent, before


def figures(
    seen: list[Record],
    times: Times,
    sent: int,
    ahead_ms: int,
    before: dict[str, dict[str, float]],
    after: dict[str, dict[str, float]],
) -> dict[str, Any]:
    """The run's figures from what the consumers took (first deliveries)."""
    firsts: dict[str, Record] = {}
    for r in sorted(seen):
        firsts.setdefault(r[2], r)
    got = list(firsts.values())
    ms = lambda r: r[0] / 1e6  # noqa: E731 - received, ms
    quiet_from = times.all_paused + SETTLE_MS
    in_pause = [r for r in got if quiet_from <= ms(r) < times.resumed_at]
    sent_while_paused = [r for r in in_pause if r[1] > quiet_from + ahead_ms]
    backlog = [r for r in got if r[1] < times.resumed_at and ms(r) >= times.resumed_at]
    drained_ms = max((ms(r) for r in backlog), default=float(times.resumed_at))
    drain_s = (drained_ms - times.resumed_at) / 1000
    warm_from = min((r[1] for r in got), default=0) + 1000  # past the first second's start-up
    warm = [r for r in got if warm_from <= r[1] < times.paused_at and ms(r) < times.paused_at]
    warm_s = max(1e-3, (times.paused_at - warm_from) / 1000)
    steady_rate = len(warm) / warm_s
    after_drain = [r for r in got if r[1] > drained_ms]
    bins: dict[int, int] = {}
    for r in got:
        k = int((ms(r) - times.resumed_at) // (BIN_S * 1000))
        if 0 <= k < 10:
            bins[k] = bins.get(k, 0) + 1
    drain_rate = len(backlog) / drain_s if drain_s > 0 else None
    ratio = None if drain_rate is None else round(drain_rate / max(steady_rate, 1), 2)
    return {
        "sent": sent,
        "delivered": len(got),
        "lost": sent - len(got),
        "early": sum(1 for r in got if r[0] // 1_000_000 < r[1]),
        "pause_s": round((times.resumed_at - times.paused_at) / 1000, 3),
        "all_brokers_paused_after_ms": times.all_paused - times.paused_at,
        "sent_while_paused": len(sent_while_paused),
        "released_while_paused_sent_before": len(in_pause) - len(sent_while_paused),
        "send_ahead_ms": ahead_ms,
        "steady_rate_held": round(steady_rate),
        "backlog": len(backlog),
        "backlog_drain_s": round(drain_s, 3),
        "backlog_drain_rate": None if drain_rate is None else round(drain_rate),
        "drain_to_steady": ratio,
        "delivered_per_s_by_100ms_after_resume": [round(bins.get(k, 0) / BIN_S) for k in range(10)],
        "lateness_before_pause": lateness(warm),
        "lateness_backlog": lateness(backlog),
        "lateness_after_drain": lateness(after_drain),
        "brokers_paused_part": histogram_split(before[PAUSED], after[PAUSED]),
        "brokers_own_part": histogram_split(before[BROKERS_OWN], after[BROKERS_OWN]),
    }


def show(results: dict[str, Any]) -> None:
    r = results
    print(
        f"pause {r['pause_s']} s on {BROKERS} brokers (every broker paused"
        f" {r['all_brokers_paused_after_ms']} ms after the call): sent while paused"
        f" {r['sent_while_paused']}, released by consumers from before it"
        f" {r['released_while_paused_sent_before']}"
    )
    print(
        f"steady rate held {r['steady_rate_held']}/s; backlog {r['backlog']} drained in"
        f" {r['backlog_drain_s']} s at {r['backlog_drain_rate']}/s"
        f" ({r['drain_to_steady']} x the steady rate)"
    )
    print(f"delivered/s by 100 ms after the resume: {r['delivered_per_s_by_100ms_after_resume']}")
    for name in ("lateness_before_pause", "lateness_backlog", "lateness_after_drain"):
        s = r[name]
        print(
            f"{name.replace('_', ' ')}: p50 {s.get('p50_ms')} p99 {s.get('p99_ms')}"
            f" max {s.get('max_ms')} ms ({s['count']} messages)"
        )
    for name in ("brokers_paused_part", "brokers_own_part"):
        s = r[name]
        print(
            f"{name.replace('_', ' ')} after the resume: {s['count']} deliveries, mean"
            f" {s.get('mean_ms')} ms, p50 <= {s.get('p50_at_most_ms')} p99 <="
            f" {s.get('p99_at_most_ms')} ms"
        )
    print(f"sent {r['sent']}, delivered {r['delivered']}, lost {r['lost']}, early {r['early']}")


async def main(args: argparse.Namespace) -> int:
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="dejaq-bench-pause-") as workdir:
        results = await drive(args, Path(workdir))
    show(results)
    config = {
        "brokers": BROKERS,
        "storage": "redis",
        "rate": args.rate,
        "warm_s": args.warm_s,
        "pause_s": args.pause_s,
        "after_s": args.after_s,
        "lead_ms": args.lead_ms,
        "cpus": os.cpu_count(),
    }
    save_record(args.name, config, results, load_before)
    failed = [k for k in ("sent_while_paused", "lost", "early") if results[k]]
    if failed:
        print(f"FAILED: {', '.join(f'{k} {results[k]}' for k in failed)}", file=sys.stderr)
        return 1
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rate", type=int, default=5000, help="messages due a second")
    p.add_argument("--warm-s", type=float, default=4.0, help="steady load before the pause")
    p.add_argument("--pause-s", type=float, default=5.0, help="how long the topic stays paused")
    p.add_argument("--after-s", type=float, default=8.0, help="load after the resume")
    p.add_argument("--lead-ms", type=int, default=500, help="each is sent this long before due")
    p.add_argument("--smoke", action="store_true", help="1k/s, paused 1.5 s: checks, figures")
    p.add_argument("--name", default="pause_drain", help="the record's name in benchmarks/results/")
    args = p.parse_args(argv)
    if args.smoke:
        args.rate, args.warm_s, args.pause_s, args.after_s = 1000, 2.0, 1.5, 2.0
        args.name = "pause_drain-smoke"
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse(sys.argv[1:]))))
