"""The OpenAPI document says what the HTTP surface does.

Given a broker with --http, when schemathesis generates requests from
/openapi.json (valid and invalid), then no answer is a 5xx, every answer is
inside the document (status, content type, schema), and the broker lives on.
The document itself is made from the route table: every route is in it once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dejaq.broker.http.app import ROUTES
from tests.e2e.broker_process import BrokerProcess

# Bounded so the run takes about a minute on a small machine; the seed makes a
# CI run repeatable (run `st run URL` without it to explore further).
MAX_EXAMPLES = 15
SEED = 20260
ST = str(Path(sys.executable).with_name("st"))


@pytest.fixture
def http_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        "memory://", tmp_path / "broker.log", args=["--http", "127.0.0.1:0"]
    ).start()
    try:
        yield process
    finally:
        assert process.stop() == 0


def _document(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url + "/openapi.json", timeout=10) as answer:
        doc: dict[str, object] = json.load(answer)
        return doc


def test_the_document_names_every_route_once(http_broker: BrokerProcess) -> None:
    doc = _document(http_broker.http_url)
    assert doc["openapi"] == "3.1.0"
    paths = doc["paths"]
    assert isinstance(paths, dict)
    served = sorted((r.method.lower(), r.path) for r in ROUTES)
    described = sorted((m, p) for p, ops in paths.items() for m in ops)
    assert described == served
    ids = [op["operationId"] for ops in paths.values() for op in ops.values()]
    assert len(ids) == len(set(ids))


@pytest.mark.timeout(300)
def test_generated_requests_get_answers_inside_the_document(
    http_broker: BrokerProcess, tmp_path: Path
) -> None:
    url = http_broker.http_url
    done = subprocess.run(
        [
            ST,
            "run",
            f"{url}/openapi.json",
            "--checks",
            "all",
            # The document gives types and ranges; rules that depend on the topic
            # or the broker's limits (a max rate's bounds, a timestamp's) are
            # answered 400 with the reason, as on gRPC: a valid-looking request
            # may be refused, so that check is left out.
            # A message leaves by design right after it is produced: cancelled
            # (a POST, which the check does not count as a delete), delivered at
            # most once, or a produce answered DUPLICATE (200) for an id whose
            # message was cancelled or acked (the dedup window keeps the id). A
            # 404 that follows is the API's meaning, not a lost resource, so the
            # check that calls it one (ST302) is left out too.
            # The event stream lasts until the client leaves, by design: its
            # answer never ends for the run to judge (tests/e2e/test_http_pull.py
            # holds it to its credits; the document above names it).
            "--exclude-path",
            "/v1/topics/{topic}/deliveries",
            "--exclude-checks",
            "positive_data_acceptance,ensure_resource_availability",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            str(SEED),
            "--workers",
            "1",
            "--no-color",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
    assert http_broker.alive
    log = (tmp_path / "broker.log").read_text()
    assert "unexpected error" not in log, log[-4000:]


def test_the_document_describes_the_recent_deliveries_and_the_timeline(
    http_broker: BrokerProcess,
) -> None:
    paths = _document(http_broker.http_url)["paths"]
    assert isinstance(paths, dict)
    for path in ("/v1/topics/{name}", "/v1/topics"):
        answer = json.dumps(paths[path]["get"]["responses"])
        assert all(f in answer for f in ("delivery_rate", "lateness_p99_ms", "over_ms")), path
    update = json.dumps(paths["/v1/topics/{name}"]["patch"])
    assert '"lease_ms"' in update and '"max_deliveries"' in update
    timeline = json.dumps(paths["/v1/topics/{topic}/timeline"]["get"])
    assert "after_timestamp_ms" in timeline and "next_after_id" in timeline


def test_the_document_describes_pausing_a_topic(http_broker: BrokerProcess) -> None:
    paths = _document(http_broker.http_url)["paths"]
    assert isinstance(paths, dict)
    assert '"paused"' in json.dumps(paths["/v1/topics/{name}"]["patch"])
    for action in ("pause", "resume"):
        operation = paths[f"/v1/topics/{{name}}/{action}"]["post"]
        assert operation["operationId"] == f"UpdateTopic_{action}"
        assert '"paused_at_ms"' in json.dumps(operation["responses"])
