"""The bridges pages, run as written against a real server (redis-server,
nats-server, rabbitmq-server) and a broker process: the program that makes
the streams or queues where the page has one, the console blocks, the bridge
process as the page runs it, and the worked example's program with its
output; and every bridges file the pages show read as the page says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dejaq.bridges import config
from dejaq.core.errors import InvalidArgument
from tests.docs.examples import ROOT, blocks
from tests.docs.page_runs import Ours, page_broker, page_process, run_console, run_program, swap
from tests.e2e.broker_process import BrokerProcess
from tests.nats_server import NatsServer
from tests.rabbitmq_server import RabbitMQServer
from tests.redis_server import RedisServer
from tests.servers import free_port

GUIDE = ROOT / "docs" / "bridges.md"
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with page_broker(tmp_path / "broker.log") as process:
        yield process


def run_page(page: Path, ours: Ours, broker: BrokerProcess, cwd: Path) -> None:
    found = blocks(page)
    *setups, example = [b for b in found if b.lang == "python" and b.output is not None]
    consoles = [b for b in found if b.lang == "console"]
    (bridges_yaml,) = [b for b in found if b.lang == "yaml"]
    run_line = next(
        c for b in found if b.lang == "sh" for c in b.text.splitlines() if "bridge run" in c
    )
    # Given the streams or queues made, the topic and the file, as the page says
    for setup in setups:
        run_program(setup, ours, cwd)
    (cwd / "bridges.yaml").write_text(swap(bridges_yaml.text, ours))
    run_console(consoles[0], broker.address, cwd, ours)
    # And the bridge running as the page runs it
    with page_process(run_line, ours, broker.address, cwd) as log:
        # When the example runs, then it prints what the page shows
        run_program(example, ours, cwd, log=log)
        # And the status the page shows
        for block in consoles[1:]:
            run_console(block, broker.address, cwd, ours)


# Each page: the fixture of its server, and the page's addresses of that server
# and of the bridge's metrics.
PAGES = {
    "bridges-redis-streams.md": ("redis_server", "127.0.0.1:6379", "127.0.0.1:9400"),
    "bridges-nats.md": ("nats_server", "127.0.0.1:4222", "127.0.0.1:9401"),
    "bridges-rabbitmq.md": ("rabbitmq_server", "127.0.0.1:5672", "127.0.0.1:9402"),
}


@pytest.mark.parametrize("page", list(PAGES))
def test_the_page_runs_as_written(
    page: str, request: pytest.FixtureRequest, broker: BrokerProcess, tmp_path: Path
) -> None:
    fixture, page_server, page_metrics = PAGES[page]
    server: RedisServer | NatsServer | RabbitMQServer = request.getfixturevalue(fixture)
    if isinstance(server, RedisServer):
        server.flush()  # the page names its streams
    ours = {page_server: f"127.0.0.1:{server.port}", page_metrics: f"127.0.0.1:{free_port()}"}
    run_page(ROOT / "docs" / page, ours, broker, tmp_path)


def test_the_files_the_pages_show_are_read_as_they_say() -> None:
    (shape,) = [b for b in blocks(GUIDE) if b.lang == "yaml"]
    (spec,) = config.parse(shape.text)
    assert (spec.name, spec.topic) == ("reorder", "reorder")
    # The refusal the guide shows, for the field it names
    (said,) = [
        b.text.strip() for b in blocks(GUIDE) if b.lang == "text" and "dejaq: error" in b.text
    ]
    bad = shape.text.replace('{field: "due_ms"}', '{field: "due_ms", format: unix}')
    with pytest.raises(InvalidArgument) as refused:
        config.parse(bad, "bridges.yaml")
    assert said == f"dejaq: error: {refused.value}"
