"""How long each web console page takes to render on a large topic.

    python benchmarks/console_pages.py                      # 1,000,000 messages
    python benchmarks/console_pages.py --messages 100000 --storage sqlite

A fresh ``dejaq broker --http`` process (memory storage unless ``--storage``);
``--messages`` waiting messages are produced with the driver over the next two
hours on a topic of 16 buckets, then Debian's Chromium (headless, driven by
Playwright) opens each page ``--runs`` times and the time from navigation to
the page showing its data is taken: Topics (the topic's waiting count), Topic
(counts, the browse page and the dead page), Topic with its load chart (the
topic's forecast: 60 one-minute bins), Cron, Cluster. The pages read paged scans and the
storage's counts, never a full listing.

Figures print as a table and go to benchmarks/results/console_pages.json.
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

from dejaq.core.clock import now_ms
from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer

RESULTS = Path(__file__).parent / "results" / "console_pages.json"
TOPIC = "big"
BATCH = 5000
SPREAD_MS = 2 * 3600 * 1000
TIMEOUT_MS = 120_000
FILES = [
    "index.html", "style.css", "app.js", "api.js", "ui.js",
    "topics.js", "topic.js", "forecast.js", "cron.js", "cluster.js",
]  # fmt: skip


async def load(address: str, count: int) -> float:
    start = time.perf_counter()
    async with Client(address) as client:
        await Admin(client).create_topic(TOPIC, TopicSettings(buckets=16))
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


async def run(args: argparse.Namespace) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="dejaq-console-bench-")
    storage = "memory://" if args.storage == "memory" else f"sqlite:///{folder}/d.db"
    try:
        async with broker(storage) as b:
            sizes = transferred(b.http)
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
            timings: dict[str, list[float]] = {name: [] for name in pages}
            async with async_playwright() as driver:
                chromium = await driver.chromium.launch(
                    executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
                )
                page = await chromium.new_page()
                for _ in range(args.runs):
                    for name, (url, ready) in pages.items():
                        timings[name].append(await timed(page, url, ready))
                await chromium.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "messages": args.messages,
        "storage": args.storage,
        "load_s": round(load_s, 1),
        "transferred_bytes": {"total": sum(sizes.values()), **sizes},
        "pages_s": {
            name: {"median": round(statistics.median(t), 3), "max": round(max(t), 3)}
            for name, t in timings.items()
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--storage", choices=["memory", "sqlite"], default="memory")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    results = asyncio.run(run(args))
    print(f"{args.messages} messages ({args.storage}) loaded in {results['load_s']} s")
    print(f"console files: {results['transferred_bytes']['total']} bytes transferred (gzip)")
    print(f"{'page':12} {'median s':>9} {'max s':>7}")
    for name, t in results["pages_s"].items():
        print(f"{name:12} {t['median']:>9} {t['max']:>7}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"saved to {RESULTS}")


if __name__ == "__main__":
    main()
