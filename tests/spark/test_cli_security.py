"""``dejaq spark schedule`` against a TLS broker with --auth: its security flags
reach the Spark workers that produce (a local master's workers inherit them as
DEJAQ_TLS_* / DEJAQ_TOKEN), and a refusal raised there is told in one line."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from dejaq.driver.admin import Admin
from dejaq.driver.cli.spark_cmd import _first_line
from tests.certs import Certs
from tests.e2e.broker_process import StartBroker
from tests.security.support import TOKENS, client, standard_policy, tls_env, write_policy

TIMEOUT_S = 180
SCHEDULE = (sys.executable, "-m", "dejaq.driver.cli.main", "spark", "schedule")


@pytest.mark.timeout(600)  # a JVM of its own, on a busy machine
def test_schedule_over_tls_with_a_token(
    spark: Any, start_broker: StartBroker, certs: Certs, tmp_path: Path
) -> None:
    # given a TLS broker with the standard auth file, and a topic t-*
    auth = write_policy(tmp_path / "auth.yaml", standard_policy())
    broker = start_broker("memory://", **tls_env(certs), DEJAQ_AUTH=str(auth))
    topic = f"t-spark-{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        async with client(broker.address, certs, token=TOKENS["admin"]) as admin:
            await Admin(admin).create_topic(topic)

    asyncio.run(create())
    rows = [{"id": f"r{i}", "timestamp_ms": 4_102_444_800_000, "payload": "x"} for i in range(50)]
    (tmp_path / "in.json").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def schedule(principal: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
        return subprocess.run(
            [
                *SCHEDULE,
                *("--input", str(tmp_path / "in.json"), "--topic", topic),
                *("--broker", broker.address, "--tls-ca", str(certs.ca)),
                *("--token", TOKENS[principal], "--master", "local[1]"),
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={**env, "PYSPARK_PYTHON": sys.executable},
        )

    # when alice (produce and describe on t-*) runs it with the CA and her token
    done = schedule("alice")
    assert done.returncode == 0, done.stderr[-2000:]
    # then every row is scheduled: the workers reached the broker over TLS as alice
    assert "50 rows: accepted 50, duplicate 0, rejected 0" in done.stdout


def test_a_refusal_inside_spark_is_told_in_one_line() -> None:
    raised = (
        "org.apache.spark.api.python.PythonException: Traceback ...\n"
        "dejaq.core.errors.PermissionDenied: principal 'describer' has no 'produce'"
        " grant for topic 't-x'\n"
    )
    assert _first_line(Exception(raised)) == (
        "principal 'describer' has no 'produce' grant for topic 't-x'"
    )
