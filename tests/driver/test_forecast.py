"""``Admin.forecast`` and ``dejaq topic forecast`` against an embedded broker."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json

import pytest

from dejaq.driver import Admin, InvalidArgument, NotFound, Producer, embedded
from dejaq.driver.cli.main import main

pytestmark = pytest.mark.timeout(60)
MINUTE = 60_000


async def given_a_campaign(admin: Admin, producer: Producer) -> None:
    """Three messages in the second minute ahead, one in the third, one in half an hour
    (each in the middle of its minute, so the bins hold however long the test takes)."""
    for i in range(3):
        await producer.send(b"hello", id=f"early-{i}", delay_ms=90_000)
    await producer.send(b"hello", id="late", delay_ms=150_000)
    await producer.send(b"hello", id="far", delay_ms=30 * MINUTE + 30_000)


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


async def test_the_driver_returns_the_bins_ahead() -> None:
    async with embedded("memory://") as client:
        admin = Admin(client)
        await admin.create_topic("campaign")
        async with Producer(client, "campaign") as producer:
            await given_a_campaign(admin, producer)
        # When the next five minutes are forecast by the minute
        forecast = await admin.forecast("campaign", horizon_ms=5 * MINUTE, step_ms=MINUTE)
        # Then each bin counts what falls due in it
        assert forecast.counts == [0, 3, 1, 0, 0]
        assert forecast.step_ms == MINUTE
        assert [start - forecast.start_ms for start, _ in forecast.bins] == [
            i * MINUTE for i in range(5)
        ]
        # and the default is an hour by the minute, a horizon rounded up to whole steps
        assert (await admin.forecast("campaign")).total == 5
        assert len((await admin.forecast("campaign", 90_000, MINUTE)).counts) == 2


async def test_bad_bins_and_missing_topics_are_refused() -> None:
    async with embedded("memory://") as client:
        admin = Admin(client)
        await admin.create_topic("campaign")
        with pytest.raises(InvalidArgument, match="at most 1000"):
            await admin.forecast("campaign", horizon_ms=3_600_000, step_ms=1_000)
        with pytest.raises(InvalidArgument, match="positive"):
            await admin.forecast("campaign", horizon_ms=MINUTE, step_ms=-1)
        with pytest.raises(NotFound):
            await admin.forecast("nowhere")


async def test_the_cli_prints_a_histogram_and_the_bins_as_json() -> None:
    async with embedded("memory://") as client:
        admin = Admin(client)
        await admin.create_topic("campaign")
        async with Producer(client, "campaign") as producer:
            await given_a_campaign(admin, producer)
        flags = ("--horizon", "5m", "--step", "1m", "--broker", client.address)
        # When the forecast is printed
        code, out, _ = await asyncio.to_thread(run_cli, "topic", "forecast", "campaign", *flags)
        # Then it is a histogram, a line a bin, the longest bar for the fullest
        assert code == 0
        assert out.splitlines() == [
            "campaign: 4 due in the next 5m, by 1m",
            "+0s  " + " " * 40 + "  0",
            "+1m  " + "#" * 40 + "  3",
            "+2m  " + "#" * 14 + " " * 26 + "  1",
            "+3m  " + " " * 40 + "  0",
            "+4m  " + " " * 40 + "  0",
        ]
        # and --json prints the bins
        code, out, _ = await asyncio.to_thread(
            run_cli, "topic", "forecast", "campaign", "--json", *flags
        )
        doc = json.loads(out)
        assert [b["count"] for b in doc["bins"]] == [0, 3, 1, 0, 0]
        assert doc["step_ms"] == MINUTE
        # and too many bins is a readable error line
        code, _, err = await asyncio.to_thread(
            run_cli,
            "topic",
            "forecast",
            "campaign",
            "--horizon",
            "1h",
            "--step",
            "1s",
            "--broker",
            client.address,
        )
        assert code == 1
        assert err.startswith("dejaq: error: a forecast of 3600000 ms in steps of 1000 ms")
