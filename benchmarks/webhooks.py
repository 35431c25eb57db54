"""Webhook delivery lateness: due time -> the request's head at a local sink process.

    python benchmarks/webhooks.py                    # 1k/s, then rising rates, 5 s a step
    python benchmarks/webhooks.py --rates 1000,5000 --step-s 3 --storage memory://

Three processes: a ``dejaq broker`` (``--webhook-allow 127.0.0.1``), a sink
(``suite/webhook_sink.py``, aiohttp, answers 200 at once), and this one, which
creates a webhook topic through the driver and produces each step's messages
ahead of time (at least 1 s before the first is due), spread evenly at the
step's rate. Per step: delivered, doubled, early, lateness p50/p99/max. The
figure: the highest rate holding p99 <= --p99-ms with none early or lost.
Saved to benchmarks/results/webhooks.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from dejaq.driver import Admin, Client, Producer, TopicSettings, Webhook
from dejaq.driver.producer import Outgoing

sys.path.insert(0, str(Path(__file__).resolve().parent))
from suite.broker import broker
from suite.procstat import cpu_s

RESULTS = Path(__file__).resolve().parent / "results" / "webhooks.json"
SINK = Path(__file__).resolve().parent / "suite" / "webhook_sink.py"
LEAD_MS = 1500  # the first message of a step is due this long after producing starts
BATCH = 1000


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rates", default="1000,2000,4000,7000,10000", help="msgs/s, comma-separated")
    p.add_argument("--step-s", type=float, default=5.0, help="seconds each step is held")
    p.add_argument("--p99-ms", type=float, default=10.0, help="a step holds at p99 <= this")
    p.add_argument("--storage", default="memory://")
    p.add_argument("--concurrency", type=int, default=64, help="the webhook's requests in flight")
    p.add_argument(
        "--keep-going", action="store_true", help="run every rate, also after one did not hold"
    )
    return p.parse_args(argv)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def start_sink() -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SINK), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
    port = line.rsplit(" ", 1)[1].strip()
    return proc, f"http://127.0.0.1:{port}"


async def step(
    client: Client,
    http: aiohttp.ClientSession,
    sink: str,
    topic: str,
    rate: int,
    seconds: float,
    pids: tuple[int, int],
) -> dict[str, Any]:
    await http.post(f"{sink}/reset")
    n = int(rate * seconds)
    start = int(time.time() * 1000) + LEAD_MS
    times = [start + (i * 1000) // rate for i in range(n)]
    async with Producer(client, topic) as producer:
        for i in range(0, n, BATCH):
            batch = [
                Outgoing(b"x" * 64, t, id=f"{rate}-{j}")
                for j, t in enumerate(times[i : i + BATCH], i)
            ]
            await producer.send_batch(batch)
    cpu_before = [cpu_s(p) for p in pids]
    deadline = time.monotonic() + LEAD_MS / 1000 + seconds + 10
    stats: dict[str, Any] = {}
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        async with http.get(f"{sink}/stats") as resp:
            stats = await resp.json()
        if stats["count"] >= n and time.time() * 1000 > times[-1] + 1000:
            break
    late: list[float] = stats.get("latenesses", [])
    broker_cpu, sink_cpu = (cpu_s(p) - c for p, c in zip(pids, cpu_before, strict=True))
    return {
        "rate": rate,
        "messages": n,
        "delivered": stats.get("count", 0),
        "doubled": stats.get("doubled", 0),
        "early": sum(1 for x in late if x < 0),
        "p50_ms": round(percentile(late, 0.50), 2),
        "p99_ms": round(percentile(late, 0.99), 2),
        "max_ms": round(max(late), 2) if late else float("nan"),
        # CPU seconds per 1,000 messages: what the rate costs, whatever the load
        "broker_cpu_ms_per_msg": round(broker_cpu * 1000 / max(n, 1), 3),
        "sink_cpu_ms_per_msg": round(sink_cpu * 1000 / max(n, 1), 3),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rates = [int(r) for r in args.rates.split(",") if r.strip()]
    sink_proc, sink = await start_sink()
    steps: list[dict[str, Any]] = []
    try:
        async with (
            broker(args.storage, env={"DEJAQ_WEBHOOK_ALLOW": "127.0.0.1"}) as b,
            Client(b.address) as client,
            aiohttp.ClientSession() as http,
        ):
            hook = Webhook(f"{sink}/hook", concurrency=args.concurrency)
            await Admin(client).create_topic("hooks", TopicSettings(webhook=hook))
            print(
                f"{'rate/s':>8} {'sent':>7} {'got':>7} {'early':>5}"
                f" {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
            )
            for rate in rates:
                s = await step(
                    client, http, sink, "hooks", rate, args.step_s, (b.pid, sink_proc.pid)
                )
                s["held"] = (
                    s["delivered"] == s["messages"]
                    and s["early"] == 0
                    and s["p99_ms"] <= args.p99_ms
                )
                steps.append(s)
                print(
                    f"{s['rate']:>8} {s['messages']:>7} {s['delivered']:>7} {s['early']:>5}"
                    f" {s['p50_ms']:>7} {s['p99_ms']:>7} {s['max_ms']:>7}"
                    f"  broker {s['broker_cpu_ms_per_msg']} ms cpu/msg"
                    + ("" if s["held"] else "  (did not hold)")
                )
                if not s["held"] and not args.keep_going:
                    break
    finally:
        sink_proc.terminate()
        await sink_proc.wait()
    held = [s["rate"] for s in steps if s["held"]]
    return {
        "storage": args.storage,
        "step_s": args.step_s,
        "p99_target_ms": args.p99_ms,
        "concurrency": args.concurrency,
        "steps": steps,
        "highest_rate_holding": max(held) if held else 0,
        "load_average": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    result = asyncio.run(run(parse(argv)))
    print(f"highest rate holding p99 <= target: {result['highest_rate_holding']}/s")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    early = sum(s["early"] for s in result["steps"])
    return 1 if early else 0


if __name__ == "__main__":
    sys.exit(main())
