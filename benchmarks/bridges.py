"""Bridges: a source queue -> dejaq -> a sink queue, messages a second in and
out at steady state, and publish lateness after due.

    python benchmarks/bridges.py                      # 20k messages/s offered for 15 s
    python benchmarks/bridges.py --rate 30000 --seconds 20
    python benchmarks/bridges.py --pair jetstream     # or rabbitmq, rabbitmq-redis
    python benchmarks/bridges.py --smoke              # a few seconds: figures come out

``--pair``: ``redis`` (Redis Stream -> Redis Stream, the default),
``jetstream`` (JetStream -> JetStream), ``rabbitmq`` (queue -> exchange) or
``rabbitmq-redis`` (queue -> Redis Stream). Their servers are the tests'
(``tests/redis_server.py``, no persistence; ``tests/nats_server.py``;
``tests/rabbitmq_server.py``), one of each kind holding both ends; a ``dejaq
broker`` process on ``memory://`` the topic; the bridge is a ``dejaq bridge
run`` process of its own, through the public driver, as a user runs it. This
process writes the source at ``--rate`` messages a second, paced every 10 ms,
each due ``--delay`` later plus a random part of ``--jitter`` (so they arrive
out of order), 100 keys, and reads the sink (``suite/bridge_ends.py``).

- **In**: messages a second the bridge's ``dejaq_bridge_accepted_total`` grew
  by between the end of the warm-up and the end of writing.
- **Out**: messages a second the sink grew by over the same span shifted by
  ``--delay`` (when those messages fell due).
- **Lateness**: each published message's time at the sink (its server's
  clock on this host where it keeps one; at a RabbitMQ sink, when this
  process's reader got it) less its ``due_ms``, p50 / p99 / max, of the
  messages written after the warm-up; and the bridge's own histogram's p99
  bucket edge (from due to the sink's confirmation).
- **Early**: published before their time (must be 0).
- **CPU**: the bridge's, the broker's, the queue servers' and this process's
  (the writer and reader) CPU seconds from when the bridge serves its metrics
  (its start-up left out) to the end, and the messages (in or out) the bridge
  moves a CPU-second: what it would carry with a core of its own, whatever
  else the machine runs.

Figures print and go to benchmarks/results/bridges.json (``--name``; other
pairs ``bridges-PAIR.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from suite.bridge_ends import PAIRS, Out, SinkEnd, SourceEnd, Written, servers
from suite.broker import broker, dejaq_command, free_port
from suite.procstat import cpu_s, load_average
from suite.record import save_record

from dejaq.driver import Admin, Client

TOPIC = "reorder"
WARMUP_S = 2.0
PACE_S = 0.01
DRAIN_TIMEOUT_S = 120.0
KEYS = 100


def bridges_file(source: SourceEnd, sink: SinkEnd, urls: dict[str, str], folder: Path) -> Path:
    path = folder / "bridges.yaml"
    path.write_text(
        f"""bridges:
  - name: reorder
    source: {source.yaml(urls[source.server])}
    topic: {TOPIC}
    due: {{field: "due_ms"}}
    id: {{field: "id"}}
    key: {{field: "user"}}
    sink: {sink.yaml(urls[sink.server])}
"""
    )
    return path


def metric(metrics: str, name: str) -> float:
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def histogram_p99(metrics: str) -> float | None:
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    buckets: list[tuple[float, float]] = []
    for line in text.splitlines():
        if line.startswith("dejaq_bridge_publish_lateness_seconds_bucket{"):
            edge = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(edge), float(line.rsplit(" ", 1)[1])))
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    return next(edge for edge, count in buckets if count >= 0.99 * total)


async def write(
    source: SourceEnd, rate: int, seconds: float, delay_ms: int, jitter_ms: int
) -> dict[str, Any]:
    """Write at ``rate`` a second for ``seconds``; the ids written after the warm-up."""
    start = time.monotonic()
    sent = 0
    first_counted = None
    n = 0
    while (elapsed := time.monotonic() - start) < seconds:
        due_now = int(elapsed * rate) - sent
        if due_now > 0:
            if first_counted is None and elapsed >= WARMUP_S:
                first_counted = n  # the first written after the warm-up
            now = int(time.time() * 1000)
            batch: list[Written] = []
            for _ in range(due_now):
                due = now + delay_ms + random.randrange(jitter_ms)
                batch.append((f"m{n}", due, f"u{n % KEYS}"))
                n += 1
            await source.write(batch)
            sent += due_now
        await asyncio.sleep(PACE_S)
    return {"written": n, "first_counted": first_counted or 0, "seconds": time.monotonic() - start}


def lateness(out: list[Out], first: int) -> tuple[list[int], int]:
    """The lateness (ms) of each message published with an id from ``first``
    on, and how many of them all were published early."""
    late: list[int] = []
    early = 0
    for o in out:
        early += o.at_ms < o.due_ms
        if int(o.id[1:]) >= first:
            late.append(o.at_ms - o.due_ms)
    return late, early


def percentile(values: list[int], p: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(p * len(ordered)))]) if ordered else float("nan")


async def run(args: argparse.Namespace, results: dict[str, Any]) -> None:
    source_end, sink_end = PAIRS[args.pair]
    source, sink = source_end(), sink_end()
    kinds = {source.server, sink.server}
    with servers(kinds) as running, tempfile.TemporaryDirectory() as folder:
        urls = {kind: server.url for kind, server in running.items()}
        await source.open(urls[source.server])
        await sink.open(urls[sink.server])
        path = bridges_file(source, sink, urls, Path(folder))
        try:
            async with broker("memory://", http_api=False) as proc:
                async with Client(proc.address) as client:
                    await Admin(client).create_topic(TOPIC)
                metrics = f"127.0.0.1:{free_port()}"
                log = Path(folder) / "bridge.log"
                command = [*dejaq_command(), "bridge", "run", str(path), "--broker", proc.address]
                with log.open("ab") as out:
                    bridge = await asyncio.create_subprocess_exec(
                        *command, "--metrics", metrics, stdout=out, stderr=out
                    )
                pids = {
                    "bridge": bridge.pid,
                    "broker": proc.pid,
                    **{kind: s.process.pid for kind, s in running.items()},
                }
                before: dict[str, float] = {}

                def serving() -> None:
                    """The bridge is up: CPU counts from here, its start-up left out."""
                    before.update({name: cpu_s(pid) for name, pid in pids.items()})
                    before["benchmark"] = cpu_s()

                try:
                    await measure(args, source, sink, metrics, results, serving)
                    used = {name: cpu_s(pid) - before[name] for name, pid in pids.items()}
                    used["benchmark"] = cpu_s() - before["benchmark"]
                    cpu(results, used)
                finally:
                    bridge.terminate()
                    await asyncio.wait_for(bridge.wait(), 30)
                if bridge.returncode != 0:
                    print(log.read_text()[-2000:])
        finally:
            await source.close()
            await sink.close()


def cpu(results: dict[str, Any], used: dict[str, float]) -> None:
    """Record and print the CPU seconds each process spent, and the bridge's a message."""
    each = results["written"] * 2  # in and out
    bridge_cpu = used["bridge"]
    results["bridge_cpu_s"], results["broker_cpu_s"] = bridge_cpu, used["broker"]
    results["cpu_s"] = {name: round(seconds, 2) for name, seconds in used.items()}
    results["bridge_messages_per_cpu_s"] = round(each / bridge_cpu)
    results["bridge_cpu_us_per_message_moved"] = round(bridge_cpu / each * 1e6, 1)
    spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in used.items())
    print(
        f"CPU: {spent}: the bridge moves {each / bridge_cpu:.0f} messages (in or out)"
        f" a CPU-second ({bridge_cpu / each * 1e6:.1f} µs a message moved)"
    )


async def measure(
    args: argparse.Namespace,
    source: SourceEnd,
    sink: SinkEnd,
    metrics: str,
    results: dict[str, Any],
    serving: Callable[[], None],
) -> None:
    deadline = time.monotonic() + 30
    while True:  # the bridge process is up and reporting
        with contextlib.suppress(OSError):
            metric(metrics, "dejaq_bridge_accepted_total")
            break
        assert time.monotonic() < deadline, "the bridge never served its metrics"
        await asyncio.sleep(0.05)
    serving()
    samples: dict[str, float] = {}

    async def sample() -> None:
        await asyncio.sleep(WARMUP_S)
        samples["in_start"] = await asyncio.to_thread(
            metric, metrics, "dejaq_bridge_accepted_total"
        )
        samples["in_start_t"] = time.monotonic()
        await asyncio.sleep(args.delay_ms / 1000)
        samples["out_start"], samples["out_start_t"] = await sink.count(), time.monotonic()

    sampler = asyncio.create_task(sample())
    written = await write(source, args.rate, args.seconds, args.delay_ms, args.jitter_ms)
    samples["in_end"] = await asyncio.to_thread(metric, metrics, "dejaq_bridge_accepted_total")
    samples["in_end_t"] = time.monotonic()
    await sampler
    wait_s = args.delay_ms / 1000 - (time.monotonic() - samples["in_end_t"])
    await asyncio.sleep(max(wait_s, 0))
    samples["out_end"], samples["out_end_t"] = await sink.count(), time.monotonic()
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while await sink.count() < written["written"]:
        assert time.monotonic() < deadline, "not every message was published"
        await asyncio.sleep(0.1)
    late, early = lateness(await sink.published(), written["first_counted"])
    in_rate = (samples["in_end"] - samples["in_start"]) / (
        samples["in_end_t"] - samples["in_start_t"]
    )
    out_rate = (samples["out_end"] - samples["out_start"]) / (
        samples["out_end_t"] - samples["out_start_t"]
    )
    results.update(
        {
            "pair": args.pair,
            "offered_per_s": args.rate,
            "written": written["written"],
            "in_per_s": round(in_rate),
            "out_per_s": round(out_rate),
            "lateness_ms": {
                "p50": percentile(late, 0.5),
                "p99": percentile(late, 0.99),
                "max": float(max(late)) if late else float("nan"),
                "counted": len(late),
                "at": sink.at,
            },
            "bridge_histogram_p99_s": histogram_p99(metrics),
            "early": early,
        }
    )
    print(
        f"{args.pair}: offered {args.rate}/s for {args.seconds:g} s: in {results['in_per_s']}/s,"
        f" out {results['out_per_s']}/s; publish lateness p50"
        f" {results['lateness_ms']['p50']:.0f} ms, p99 {results['lateness_ms']['p99']:.0f} ms,"
        f" max {results['lateness_ms']['max']:.0f} ms (at {sink.at}); bridge's own p99"
        f" <= {results['bridge_histogram_p99_s']} s; early {early}"
    )
    assert early == 0, f"{early} messages published before their time"


async def main(args: argparse.Namespace) -> None:
    load_before = load_average()
    results: dict[str, Any] = {}
    await run(args, results)
    config = {
        "pair": args.pair,
        "rate": args.rate,
        "seconds": args.seconds,
        "delay_ms": args.delay_ms,
        "jitter_ms": args.jitter_ms,
        "cpus": os.cpu_count(),
    }
    save_record(args.name, config, results, load_before)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rate", type=int, default=20_000, help="messages a second offered")
    p.add_argument("--seconds", type=float, default=15.0, help="how long they are offered")
    p.add_argument("--delay-ms", type=int, default=2000, help="each is due this much later")
    p.add_argument("--jitter-ms", type=int, default=1000, help="plus up to this, at random")
    p.add_argument(
        "--pair",
        choices=sorted(PAIRS),
        default="redis",
        help="the source and sink queues (default redis: Redis Stream -> Redis Stream)",
    )
    p.add_argument("--smoke", action="store_true", help="2k/s for 4 s: figures come out")
    p.add_argument("--name", help="the record's name in benchmarks/results/ (default bridges)")
    args = p.parse_args(argv)
    if args.rate < 1 or args.seconds <= WARMUP_S or args.delay_ms < 0 or args.jitter_ms < 1:
        p.error("--rate, --jitter-ms above 0, --seconds above 2 (the warm-up), --delay-ms from 0")
    if args.smoke:
        args.rate, args.seconds, args.delay_ms = 2000, 4.0, 1000
    if args.name is None:
        args.name = "bridges" + ("" if args.pair == "redis" else f"-{args.pair}")
        args.name += "-smoke" if args.smoke else ""
    return args


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
