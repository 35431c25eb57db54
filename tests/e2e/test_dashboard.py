"""The Grafana dashboard queries only metrics the broker really exports."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from dejaq.core.model import KIND_PRIORITY
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing

from .broker_process import BrokerProcess
from .support import consuming, create_topic, now_ms, produce, wait_until
from .test_observability import observed, scrape, traffic  # noqa: F401 - fixtures

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dejaq.json"
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def queried_metrics(dashboard: dict[str, object]) -> set[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]  # type: ignore[attr-defined]
    return {name for e in exprs for name in re.findall(r"\b(dejaq_[a-z_]+)", e)}


async def test_every_dashboard_metric_is_exported(
    observed: tuple[BrokerProcess, int],  # noqa: F811
    traffic: str,  # noqa: F811
) -> None:
    # Given the dashboard and a broker that has seen traffic, on a priority topic too
    dashboard = json.loads(DASHBOARD.read_text())
    broker, port = observed
    async with Client(broker.address) as client:
        jobs = await create_topic(client, "jobs", kind=KIND_PRIORITY, priorities=10)
        await produce(client, jobs, [Outgoing(b"x", now_ms(), priority=3)])
        async with consuming(client, jobs) as inbox:
            await (await inbox.take(1))[0].ack(confirm=True)

    async def refreshed() -> bool:  # the storage-backed gauges appear on first refresh
        series = f'dejaq_lag_seconds{{kind="timeline",topic="{traffic}"}}'
        text = await asyncio.to_thread(scrape, port)
        return series in text and f'dejaq_due_ahead{{kind="timeline",topic="{traffic}"' in text

    await wait_until(refreshed, timeout_s=10, what="gauges to be refreshed")
    text = await asyncio.to_thread(scrape, port)
    exported = set(re.findall(r"^(dejaq_[a-z_]+)", text, re.MULTILINE))
    # Then every metric a panel queries is in the exposition
    missing = {m for m in queried_metrics(dashboard) if m not in exported}
    assert not missing, f"dashboard queries metrics the broker does not export: {missing}"
    assert len(dashboard["panels"]) >= 6
