"""Observability of a live broker: Prometheus metrics (checked by promtool and
scraped by a real Prometheus), gRPC health and reflection, JSON logs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from dejaq.core.model import InsertStatus
from dejaq.driver.client import Client
from dejaq.driver.cron import Cron
from dejaq.driver.producer import Outgoing, Producer
from tests.servers import free_port, require_binary

from .broker_process import BrokerProcess, StartBroker
from .support import consuming, create_topic, now_ms, produce, wait_until

SECRET = "payload-must-not-be-logged-7f3a"


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one series in Prometheus text format, or None."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture
def observed(start_broker: StartBroker) -> tuple[BrokerProcess, int]:
    port = free_port()
    broker = start_broker(
        "memory://",
        DEJAQ_METRICS=f"127.0.0.1:{port}",
        DEJAQ_METRICS_REFRESH_MS="200",
        DEJAQ_LOG_FORMAT="json",
        DEJAQ_LOG_LEVEL="DEBUG",
    )
    return broker, port


@pytest.fixture
async def traffic(observed: tuple[BrokerProcess, int]) -> AsyncIterator[str]:
    """A topic that has seen produce, duplicates, deliveries, acks and a nack."""
    broker, _ = observed
    async with Client(broker.address) as client:
        topic = await create_topic(client, "observed")
        due = now_ms() + 50
        messages = [Outgoing(SECRET.encode(), due, id=f"m{i}") for i in range(10)]
        await produce(client, topic, messages)
        async with Producer(client, topic) as producer:
            again = await producer.send_batch(messages[:3])
        assert {r.status for r in again} == {InsertStatus.DUPLICATE}
        async with consuming(client, topic, credits=20) as inbox:
            got = await inbox.take(10)
            await got[0].nack(60_000, confirm=True)
            await asyncio.gather(*(d.ack(confirm=True) for d in got[1:]))
        await Cron(client).add(topic, "yearly", "0 0 1 1 *")  # its series exist from now on
        yield topic


async def test_counters_gauges_and_histograms_follow_traffic(
    observed: tuple[BrokerProcess, int], traffic: str
) -> None:
    _, port = observed

    async def settled() -> bool:
        text = await asyncio.to_thread(scrape, port)
        return sample(text, "dejaq_messages", topic=traffic, state="waiting") == 1.0

    await wait_until(settled, timeout_s=10)
    text = await asyncio.to_thread(scrape, port)
    assert sample(text, "dejaq_produced_total", topic=traffic) == 10
    assert sample(text, "dejaq_duplicates_total", topic=traffic) == 3
    assert sample(text, "dejaq_delivered_total", topic=traffic) == 10
    assert sample(text, "dejaq_acked_total", topic=traffic) == 9
    assert sample(text, "dejaq_nacked_total", topic=traffic) == 1
    assert sample(text, "dejaq_delivery_lateness_seconds_count", topic=traffic) == 10
    assert sample(text, "dejaq_storage_up") == 1
    assert sample(text, "dejaq_storage_operation_seconds_count", operation="lease", outcome="ok")
    assert sample(text, "dejaq_grpc_requests_total", method="CreateTopic", code="OK") == 1
    # bounded labels: no message ids in any series
    assert 'id="' not in text and "m1" not in text.replace("dejaq_", "")


async def test_promtool_accepts_the_metrics(
    observed: tuple[BrokerProcess, int], traffic: str
) -> None:
    promtool = require_binary("promtool")
    _, port = observed

    async def forecast_reported() -> bool:
        # the nacked message waits a minute: due within 5 minutes
        text = await asyncio.to_thread(scrape, port)
        return sample(text, "dejaq_due_ahead", topic=traffic, within="5m") == 1.0

    await wait_until(forecast_reported, timeout_s=10)
    text = await asyncio.to_thread(scrape, port)
    result = await asyncio.to_thread(
        subprocess.run,
        [promtool, "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def prometheus(observed: tuple[BrokerProcess, int], tmp_path: Path) -> Iterator[int]:
    """A real Prometheus scraping the broker every 500 ms."""
    binary = require_binary("prometheus")
    _, metrics_port = observed
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 500ms, evaluation_interval: 500ms}\n"
        "scrape_configs:\n"
        "  - job_name: dejaq\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]\n"
    )
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def query(port: int, promql: str) -> list[dict[str, object]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = json.loads(resp.read())
    except OSError:
        return []  # not up yet
    return list(body["data"]["result"]) if body.get("status") == "success" else []


async def test_a_real_prometheus_scrapes_the_broker(prometheus: int, traffic: str) -> None:
    promql = f'dejaq_produced_total{{topic="{traffic}"}}'

    async def scraped() -> bool:
        return bool(await asyncio.to_thread(query, prometheus, promql))

    await wait_until(scraped, timeout_s=60, what="Prometheus to scrape the broker")
    (series,) = await asyncio.to_thread(query, prometheus, promql)
    assert series["metric"]["job"] == "dejaq"  # type: ignore[index]
    assert float(series["value"][1]) == 10  # type: ignore[index]
    lateness = await asyncio.to_thread(
        query, prometheus, f'dejaq_delivery_lateness_seconds_count{{topic="{traffic}"}}'
    )
    assert lateness and float(lateness[0]["value"][1]) == 10  # type: ignore[index]


async def test_health_and_reflection_answer(observed: tuple[BrokerProcess, int]) -> None:
    broker, _ = observed
    async with grpc.aio.insecure_channel(broker.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "dejaq.v1.Timeline"):
            resp = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = refl.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")])
        )
        names = set()
        async for answer in call:
            names = {s.name for s in answer.list_services_response.service}
            break
    assert {"dejaq.v1.Timeline", "grpc.health.v1.Health"} <= names


async def test_logs_are_json_lines_without_payloads(
    observed: tuple[BrokerProcess, int], traffic: str
) -> None:
    broker, _ = observed
    lines = [line for line in broker.log_path.read_text().splitlines() if line.strip()]
    assert lines
    for line in lines:
        entry = json.loads(line)
        assert {"ts", "level", "logger", "message"} <= entry.keys()
    assert SECRET not in broker.log_path.read_text()
