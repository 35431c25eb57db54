"""How long each web console page takes to render on a large topic.

    python benchmarks/console_pages.py                      # 1,000,000 messages
    python benchmarks/console_pages.py --storage sqlite --messages 100000
    python benchmarks/console_pages.py --smoke              # CI: SQLite, 1M, one run

A fresh ``dejaq broker --http`` process (memory storage unless ``--storage``)
with ``--messages`` waiting messages due over the next two hours on a topic of
16 buckets: produced with the driver on memory; on SQLite written into the
file in bulk through the storage backend before the broker starts (the load
is not what is measured, and the driver would take minutes). Then, ``--runs``
times, each page's HTTP API calls (those the page makes, one at a time) are
timed, and Debian's Chromium (headless, driven by Playwright) opens each page
and the time from navigation to the page showing its data is taken: Topics
(the topic's waiting count), Topic (counts, the browse page and the dead
page), Topic with its load chart (the topic's forecast: 60 one-minute bins),
Cron, Cluster. The pages read paged scans and the storage's counts, never a
full listing.

Figures print as tables and go to benchmarks/results/console_pages.json
(console_pages_smoke.json with ``--smoke``); nothing is judged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from playwright.async_api import Page, async_playwright
from suite.broker import broker

from dejaq.core.buckets import buckets_of
from dejaq.core.clock import now_ms
from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from dejaq.storage_plugins import storage_from_url

RESULTS = Path(__file__).parent / "results"
TOPIC = "big"
BUCKETS = 16
BATCH = 5000
BULK_BATCH = 50_000
SPREAD_MS = 2 * 3600 * 1000
TIMEOUT_MS = 120_000
FILES = [
    "index.html", "style.css", "app.js", "api.js", "ui.js",
    "topics.js", "topic.js", "forecast.js", "cron.js", "cluster.js",
]  # fmt: skip


async def load(address: str, count: int) -> float:
    """Produce ``count`` messages through the driver."""
    start = time.perf_counter()
    async with Client(address) as client:
        await Admin(client).create_topic(TOPIC, TopicSettings(buckets=BUCKETS))
        t = now_ms() + 60_000
        async with Producer(client, TOPIC) as producer:
            for first in range(0, count, BATCH):
                await producer.send_batch(
                    [
                        Outgoing(b"", t + (i * SPREAD_MS) // count, id=f"m{i:08d}")
                        for i in range(first, min(first + BATCH, count))
                    ]
                )
    return time.perf_counter() - start


async def bulk_load(url: str, count: int) -> float:
    """Write ``count`` messages straight into the storage, before a broker opens it."""
    start = time.perf_counter()
    storage = storage_from_url(url)
    await storage.open()
    try:
        await storage.create_topic(Topic(TOPIC, TopicSettings(buckets=BUCKETS), now_ms()))
        t = now_ms() + 60_000
        for first in range(0, count, BULK_BATCH):
            ids = [f"m{i:08d}" for i in range(first, min(first + BULK_BATCH, count))]
            buckets = buckets_of(ids, BUCKETS)
            await storage.insert(
                TOPIC,
                [
                    NewMessage(id, t + ((first + n) * SPREAD_MS) // count, b"", bucket)
                    for n, (id, bucket) in enumerate(zip(ids, buckets, strict=True))
                ],
            )
    finally:
        await storage.close()
    return time.perf_counter() - start


def api_calls(base: str, paths: list[str]) -> dict[str, float]:
    """Seconds each API call of a page takes, made one after the other."""
    out = {}
    for path in paths:
        request = urllib.request.Request(f"{base}{path}", headers={"Accept": "application/json"})
        start = time.perf_counter()
        with urllib.request.urlopen(request, timeout=TIMEOUT_MS / 1000) as answer:
            answer.read()
        out[path] = time.perf_counter() - start
    return out


def transferred(base: str) -> dict[str, int]:
    """Bytes on the wire of each console file, fetched as a browser does (gzip)."""
    sizes = {}
    for name in FILES:
        request = urllib.request.Request(f"{base}/console/{name}")
        request.add_header("Accept-Encoding", "gzip")
        with urllib.request.urlopen(request, timeout=10) as answer:
            sizes[name] = len(answer.read())  # urllib leaves the gzip as it came
    return sizes


async def timed(page: Page, url: str, ready: list[str]) -> float:
    """Seconds from navigating to ``url`` until every selector in ``ready`` shows."""
    await page.goto("about:blank")
    start = time.perf_counter()
    await page.goto(url)
    for selector in ready:
        await page.wait_for_selector(selector, timeout=TIMEOUT_MS)
    return time.perf_counter() - start


def page_calls() -> dict[str, list[str]]:
    """The HTTP API calls each page makes on its first refresh, as its module does."""
    base = f"/v1/topics/{TOPIC}"
    topic = [
        f"/v1/whoami?topic={TOPIC}",
        base,
        f"{base}/timeline?limit=50&without_payloads=true",
        f"{base}/dead?limit=50&after_id=",
    ]
    return {
        "topics": ["/v1/topics", base],
        "topic": topic,
        "topic+chart": [*topic, f"{base}/forecast?horizon_ms=3600000&step_ms=60000"],
        "cron": ["/v1/topics", f"{base}/cron?limit=1000"],
        "cluster": ["/v1/cluster"],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="dejaq-console-bench-")
    storage = "memory://" if args.storage == "memory" else f"sqlite:///{folder}/d.db"
    try:
        load_s = 0.0
        if args.storage == "sqlite":
            load_s = await bulk_load(storage, args.messages)
        async with broker(storage) as b:
            sizes = transferred(b.http)
            if args.storage == "memory":
                load_s = await load(b.address, args.messages)
            pages = {
                "topics": (f"{b.http}/console/#/topics", [f"text={args.messages}"]),
                "topic": (
                    f"{b.http}/console/#/topic/{TOPIC}",
                    ['a[href="#"]', "text=No dead messages."],
                ),
                "topic+chart": (
                    f"{b.http}/console/#/topic/{TOPIC}",
                    ['a[href="#"]', "text=No dead messages.", "figure figcaption"],
                ),
                "cron": (f"{b.http}/console/#/cron", ["text=No cron entries."]),
                "cluster": (f"{b.http}/console/#/cluster", ["text=Brokers", "td"]),
            }
            calls = page_calls()
            timings: dict[str, list[float]] = {name: [] for name in pages}
            api: dict[str, dict[str, list[float]]] = {
                name: {path: [] for path in paths} for name, paths in calls.items()
            }
            async with async_playwright() as driver:
                chromium = await driver.chromium.launch(
                    executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
                )
                page = await chromium.new_page()
                for _ in range(args.runs):
                    for name, (url, ready) in pages.items():
                        for path, seconds in api_calls(b.http, calls[name]).items():
                            api[name][path].append(seconds)
                        timings[name].append(await timed(page, url, ready))
                await chromium.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "messages": args.messages,
        "storage": args.storage,
        "runs": args.runs,
        "load_s": round(load_s, 1),
        "transferred_bytes": {"total": sum(sizes.values()), **sizes},
        "pages_s": {name: _summary(t) for name, t in timings.items()},
        "api_s": {
            name: {path: _summary(t) for path, t in paths.items()} for name, paths in api.items()
        },
    }


def _summary(seconds: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(seconds), 3), "max": round(max(seconds), 3)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--storage", choices=["memory", "sqlite"], default="memory")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="CI: SQLite, 1M messages, one run")
    args = p.parse_args()
    if args.smoke:
        args.storage, args.messages, args.runs = "sqlite", 1_000_000, 1
    results = asyncio.run(run(args))
    print(f"{args.messages} messages ({args.storage}) loaded in {results['load_s']} s")
    print(f"console files: {results['transferred_bytes']['total']} bytes transferred (gzip)")
    print(f"{'page / API call':60} {'median s':>9} {'max s':>7}")
    for name, t in results["pages_s"].items():
        print(f"{name + ' (rendered)':60} {t['median']:>9} {t['max']:>7}")
        for path, c in results["api_s"][name].items():
            print(f"  {path[:58]:58} {c['median']:>9} {c['max']:>7}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / ("console_pages_smoke.json" if args.smoke else "console_pages.json")
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"saved to {path}")


if __name__ == "__main__":
    main()
