"""Bridges: Redis Stream -> dejaq -> Redis Stream, messages a second in and out
at steady state, and publish lateness after due.

    python benchmarks/bridges.py                      # 20k messages/s offered for 15 s
    python benchmarks/bridges.py --rate 30000 --seconds 20
    python benchmarks/bridges.py --smoke              # a few seconds: figures come out

A redis-server of the tests (``tests/redis_server.py``, no persistence) holds
both streams; a ``dejaq broker`` process on ``memory://`` the topic; the
bridge is a ``dejaq bridge run`` process of its own, through the public
driver, as a user runs it. This process writes stream ``in`` at ``--rate``
messages a second, paced every 10 ms, each due ``--delay`` later plus a random
part of ``--jitter`` (so they arrive out of order), and reads stream ``out``.

- **In**: messages a second the bridge's ``dejaq_bridge_accepted_total`` grew
  by between the end of the warm-up and the end of writing.
- **Out**: entries a second stream ``out`` grew by over the same span shifted
  by ``--delay`` (when those messages fell due).
- **Lateness**: each published entry's time (its stream entry id, the sink
  server's clock on this host) less its ``due_ms``, p50 / p99 / max, of the
  messages written after the warm-up; and the bridge's own histogram's p99
  bucket edge (from due to the sink's confirmation).
- **Early**: published before their time (must be 0).
- **CPU**: the bridge's and the broker's CPU seconds over the run, and the
  messages (in or out) the bridge moves a CPU-second: what it would carry with
  a core of its own, whatever else the machine runs.

Figures print and go to benchmarks/results/bridges.json (``--name``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import redis
from suite.backends import ROOT
from suite.broker import broker, dejaq_command, free_port
from suite.procstat import cpu_s, load_average
from suite.record import save_record

from dejaq.driver import Admin, Client

TOPIC = "reorder"
WARMUP_S = 2.0
PACE_S = 0.01
DRAIN_TIMEOUT_S = 120.0


@contextlib.contextmanager
def redis_server() -> Any:
    sys.path.insert(0, str(ROOT))
    from tests.redis_server import RedisServer
    from tests.servers import require_binary, running, temporary_root

    with running(RedisServer(require_binary("redis-server"), temporary_root("bench"))) as s:
        yield s


def bridges_file(url: str, folder: Path) -> Path:
    stream_url = url.replace("redis://", "redis-stream://")
    path = folder / "bridges.yaml"
    path.write_text(
        f"""bridges:
  - name: reorder
    source: {{url: "{stream_url}", stream: "in", group: "dejaq"}}
    topic: {TOPIC}
    due: {{field: "due_ms"}}
    id: {{field: "id"}}
    key: {{field: "user"}}
    sink: {{url: "{stream_url}", stream: "out"}}
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


def write(url: str, rate: int, seconds: float, delay_ms: int, jitter_ms: int) -> dict[str, Any]:
    """Write at ``rate`` a second for ``seconds``; the ids written after the warm-up."""
    client = redis.Redis.from_url(url)
    start = time.monotonic()
    sent = 0
    first_counted = None
    n = 0
    while (elapsed := time.monotonic() - start) < seconds:
        due_now = int(elapsed * rate) - sent
        if due_now > 0:
            now = int(time.time() * 1000)
            pipe = client.pipeline(transaction=False)
            for _ in range(due_now):
                due = now + delay_ms + random.randrange(jitter_ms)
                fields = {"payload": "x" * 64, "due_ms": due, "id": f"m{n}", "user": f"u{n % 100}"}
                pipe.xadd("in", fields)  # type: ignore[arg-type]
                n += 1
            pipe.execute()
            sent += due_now
            if first_counted is None and elapsed >= WARMUP_S:
                first_counted = n
        time.sleep(PACE_S)
    return {"written": n, "first_counted": first_counted or 0, "seconds": time.monotonic() - start}


def published(client: redis.Redis, first: int) -> tuple[list[int], int]:
    """The lateness (ms) of each entry of stream out with an id from ``first`` on,
    and how many were published early."""
    late: list[int] = []
    early = 0
    last = "-"
    while True:
        page = client.xrange("out", min=last, count=20_000)
        if last != "-":
            page = page[1:]
        if not page:
            return late, early
        for entry_id, fields in page:
            at = int(entry_id.split(b"-")[0])
            due = int(fields[b"due_ms"])
            early += at < due
            if int(fields[b"id"][1:]) >= first:
                late.append(at - due)
        last = page[-1][0].decode()


def percentile(values: list[int], p: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(p * len(ordered)))]) if ordered else float("nan")


async def run(args: argparse.Namespace, results: dict[str, Any]) -> None:
    with redis_server() as server, tempfile.TemporaryDirectory() as folder:
        path = bridges_file(server.url, Path(folder))
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
            try:
                cpu = cpu_s(bridge.pid), cpu_s(proc.pid)
                await measure(args, server, metrics, results)
                bridge_cpu, broker_cpu = cpu_s(bridge.pid) - cpu[0], cpu_s(proc.pid) - cpu[1]
                each = results["written"] * 2  # in and out
                results["bridge_cpu_s"], results["broker_cpu_s"] = bridge_cpu, broker_cpu
                results["bridge_messages_per_cpu_s"] = round(each / bridge_cpu)
                print(
                    f"CPU: bridge {bridge_cpu:.1f} s, broker {broker_cpu:.1f} s:"
                    f" the bridge moves {each / bridge_cpu:.0f} messages (in or out) a CPU-second"
                )
            finally:
                bridge.terminate()
                await asyncio.wait_for(bridge.wait(), 30)
            if bridge.returncode != 0:
                print(log.read_text()[-2000:])


async def measure(
    args: argparse.Namespace, server: Any, metrics: str, results: dict[str, Any]
) -> None:
    sink = server.client()
    deadline = time.monotonic() + 30
    while True:  # the bridge process is up and reporting
        with contextlib.suppress(OSError):
            metric(metrics, "dejaq_bridge_accepted_total")
            break
        assert time.monotonic() < deadline, "the bridge never served its metrics"
        await asyncio.sleep(0.05)
    written: dict[str, Any] = {}
    samples: dict[str, float] = {}

    def writer() -> None:
        written.update(write(server.url, args.rate, args.seconds, args.delay_ms, args.jitter_ms))

    def sample_in() -> None:
        time.sleep(WARMUP_S)
        samples["in_start"], samples["in_start_t"] = (
            metric(metrics, "dejaq_bridge_accepted_total"),
            time.monotonic(),
        )
        time.sleep(args.delay_ms / 1000)
        samples["out_start"], samples["out_start_t"] = sink.xlen("out"), time.monotonic()

    sampler = threading.Thread(target=sample_in)
    sampler.start()
    await asyncio.to_thread(writer)
    samples["in_end"], samples["in_end_t"] = (
        metric(metrics, "dejaq_bridge_accepted_total"),
        time.monotonic(),
    )
    await asyncio.to_thread(sampler.join)
    wait_s = args.delay_ms / 1000 - (time.monotonic() - samples["in_end_t"])
    await asyncio.sleep(max(wait_s, 0))
    samples["out_end"], samples["out_end_t"] = sink.xlen("out"), time.monotonic()
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while sink.xlen("out") < written["written"]:
        assert time.monotonic() < deadline, "not every message was published"
        await asyncio.sleep(0.1)
    late, early = published(sink, written["first_counted"])
    in_rate = (samples["in_end"] - samples["in_start"]) / (
        samples["in_end_t"] - samples["in_start_t"]
    )
    out_rate = (samples["out_end"] - samples["out_start"]) / (
        samples["out_end_t"] - samples["out_start_t"]
    )
    results.update(
        {
            "offered_per_s": args.rate,
            "written": written["written"],
            "in_per_s": round(in_rate),
            "out_per_s": round(out_rate),
            "lateness_ms": {
                "p50": percentile(late, 0.5),
                "p99": percentile(late, 0.99),
                "max": float(max(late)) if late else float("nan"),
                "counted": len(late),
            },
            "bridge_histogram_p99_s": histogram_p99(metrics),
            "early": early,
        }
    )
    print(
        f"offered {args.rate}/s for {args.seconds:g} s: in {results['in_per_s']}/s,"
        f" out {results['out_per_s']}/s; publish lateness p50"
        f" {results['lateness_ms']['p50']:.0f} ms, p99 {results['lateness_ms']['p99']:.0f} ms,"
        f" max {results['lateness_ms']['max']:.0f} ms; early {early}"
    )
    assert early == 0, f"{early} messages published before their time"


async def main(args: argparse.Namespace) -> None:
    load_before = load_average()
    results: dict[str, Any] = {}
    await run(args, results)
    config = {
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
    p.add_argument("--smoke", action="store_true", help="2k/s for 4 s: figures come out")
    p.add_argument("--name", default="bridges", help="the record's name in benchmarks/results/")
    args = p.parse_args(argv)
    if args.smoke:
        args.rate, args.seconds, args.delay_ms, args.name = 2000, 4.0, 1000, "bridges-smoke"
    return args


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
