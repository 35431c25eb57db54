"""The driver's CPU a message with tracing off and on.

    python benchmarks/tracing_cost.py                  # 20,000 messages a mode
    python benchmarks/tracing_cost.py --messages 50000

One ``dejaq broker`` process on ``memory://``; for each mode a client process
of its own (the OpenTelemetry globals are per process) produces the messages
(``send_batch`` of 1000, then ``send`` one at a time, 100 awaited together)
and consumes and acks them, and reports the CPU time of its whole process
(gRPC's threads included) a message for each phase:

- ``no-api``: OpenTelemetry not importable, as without ``dejaq-timeline[otel]``;
- ``no-provider``: the API installed, no provider set (its no-op);
- ``sdk-100``: the SDK's tracer and meter providers, every span sampled and
  handed to a batch processor whose exporter drops them (the cost of making
  the spans, the headers and the metrics, not of sending them anywhere);
- ``sdk-1``: the same with the SDK's sampler keeping 1% of the traces.

Figures print and go to benchmarks/results/tracing_cost.json (``--name``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from suite.broker import broker
from suite.procstat import load_average
from suite.record import save_record

MODES = ("no-api", "no-provider", "sdk-1", "sdk-100")
BATCH = 1000
TOGETHER = 100


def _setup(mode: str) -> None:
    if mode == "no-api":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # an ImportError
        return
    if mode == "no-provider":
        return
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    ratio = 0.01 if mode == "sdk-1" else 1.0
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


async def _child(mode: str, address: str, n: int) -> dict[str, float]:
    _setup(mode)
    from dejaq.driver import Admin, Client, Consumer, Producer
    from dejaq.driver.producer import Outgoing

    topic = f"cost-{mode}"
    out: dict[str, float] = {}
    async with Client(address) as client:
        await Admin(client).create_topic(topic)
        async with Producer(client, topic) as producer:
            due = int(time.time() * 1000)
            cpu = time.process_time()
            for start in range(0, n, BATCH):
                await producer.send_batch(
                    [Outgoing(b"x" * 64, due, id=f"b{i}") for i in range(start, start + BATCH)]
                )
            out["produce_batch_us"] = (time.process_time() - cpu) / n * 1e6
            cpu = time.process_time()
            for start in range(0, n, TOGETHER):
                await asyncio.gather(
                    *(
                        producer.send(b"x" * 64, at_ms=due, id=f"s{start + i}")
                        for i in range(TOGETHER)
                    )
                )
            out["produce_single_us"] = (time.process_time() - cpu) / n * 1e6
        taken = 0
        cpu = time.process_time()
        async with Consumer(client, topic) as consumer:
            async for d in consumer:
                await d.ack()
                taken += 1
                if taken == 2 * n:
                    break
        out["consume_us"] = (time.process_time() - cpu) / taken * 1e6
    return out


async def _main(args: argparse.Namespace) -> None:
    load_before = load_average()
    results: dict[str, Any] = {}
    async with broker("memory://") as b:
        for mode in MODES:
            command = [sys.executable, __file__, "--child", mode, "--address", b.address]
            command += ["--messages", str(args.messages)]
            done = await asyncio.to_thread(
                subprocess.run, command, capture_output=True, text=True, check=True
            )
            results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
            print(mode, {k: round(v, 1) for k, v in results[mode].items()}, flush=True)
    save_record(args.name, {"messages": args.messages}, results, load_before)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=20_000, help="a phase (20,000)")
    p.add_argument("--name", default="tracing_cost", help="results/NAME.json")
    p.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    p.add_argument("--address", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(args.child, args.address, args.messages))))
        return
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
