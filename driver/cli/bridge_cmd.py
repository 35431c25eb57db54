"""``dejaq bridge run|list FILE`` and ``dejaq bridge status``: dejaq between two
other queues (docs/bridges.md)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import urllib.error
import urllib.request
from typing import Any

from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact
from dejaq.driver.cli.common import add_broker, emit
from dejaq.driver.cli.until_stopped import (
    add_metrics,
    metrics_address,
    run_until_signal,
    serve_metrics,
)
from dejaq.driver.client import Client

GC_YOUNGEST = 10_000  # allocations net of frees before the youngest generation's pass


def register(sub: Any) -> None:
    bridge = sub.add_parser("bridge", help="bridges: dejaq between two other queues")
    bsub = bridge.add_subparsers(dest="bridge_command", required=True, metavar="COMMAND")
    p = bsub.add_parser(
        "run",
        help="run the bridges of FILE until SIGTERM",
        description="Run each bridge of the YAML file FILE: read its source into its topic,"
        " and publish the topic's due messages to its sink.",
    )
    p.add_argument("file", metavar="FILE", help="the bridges file (docs/bridges.md)")
    add_broker(p)
    add_metrics(p)
    p.set_defaults(run=run)
    p = bsub.add_parser(
        "list",
        help="check FILE and list its bridges",
        description="Read and check the bridges file FILE (connecting to nothing) and list"
        " each bridge: its source, topic and sink.",
    )
    p.add_argument("file", metavar="FILE", help="the bridges file")
    p.set_defaults(run=list_bridges)
    p = bsub.add_parser(
        "status",
        help="lag at the source, held, published and errors of running bridges",
        description="Read the Prometheus metrics of a running `dejaq bridge run --metrics`"
        " or of a broker run with --bridges and --metrics, and show each bridge.",
    )
    p.add_argument(
        "--metrics", required=True, help="HOST:PORT of the bridge's or broker's /metrics"
    )
    p.add_argument("--json", action="store_true", help="one JSON object, bridge -> figures")
    p.set_defaults(run=status)


def run(args: argparse.Namespace) -> int:
    from dejaq.bridges import config
    from dejaq.bridges.metrics import BridgeMetrics
    from dejaq.bridges.runner import run_all

    specs = config.load(args.file)  # imports the ends' client libraries too
    metrics = BridgeMetrics()
    serve_metrics(args.metrics, metrics.registry)

    # What is loaded by now lives as long as the process: out of the collector's
    # passes, as in the broker. A bridge makes and drops a few objects a message,
    # so the youngest generation is collected once 10,000 outlive their batch,
    # not 700: the collector took a sixth of the bridge's CPU at the default.
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNGEST, *gc.get_threshold()[1:])

    async def work(client: Client, stop: asyncio.Event) -> None:
        await run_all(specs, client, metrics, stop)

    return run_until_signal(args, work)


def list_bridges(args: argparse.Namespace) -> int:
    from dejaq.bridges import config

    for spec in config.load(args.file):
        sink = redact(spec.sink.url) + _stream(spec.sink.options) if spec.sink else "-"
        source = redact(spec.source.url) + _stream(spec.source.options)
        print(f"{spec.name}: {source} -> topic {spec.topic} -> {sink}")
    return 0


def _stream(options: Any) -> str:
    named = [f"{k}={v}" for k, v in options.items() if k in ("stream", "subject", "queue")]
    return f" ({', '.join(named)})" if named else ""


def status(args: argparse.Namespace) -> int:
    from prometheus_client.parser import text_string_to_metric_families

    from dejaq.bridges.metrics import FIGURES, figures

    host, port = metrics_address(args.metrics)
    url = f"http://{host}:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        raise InvalidArgument(f"--metrics {args.metrics}: cannot read {url}: {exc}") from None
    found = figures(text_string_to_metric_families(text))
    if args.json:
        emit(dict(sorted(found.items())))
        return 0
    if not found:
        print(f"no bridge reports at {url}")
        return 0
    for name, row in sorted(found.items()):
        print(f"{name}: " + "  ".join(f"{k}: {row[k]}" for k in FIGURES.values()))
    return 0
