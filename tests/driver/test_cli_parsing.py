"""CLI time parsing and argument handling, without a broker."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument
from dejaq.driver.cli.common import duration_ms, timestamp_ms
from dejaq.driver.cli.main import build_parser, main


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("250ms", 250),
        ("30s", 30_000),
        ("1.5s", 1500),
        ("5m", 300_000),
        ("2h", 7_200_000),
        ("7d", 604_800_000),
        ("42", 42),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "s", "5 parsecs", "-3s", "1e3s"])
def test_bad_durations_name_the_input(text: str) -> None:
    with pytest.raises(InvalidArgument, match="duration"):
        duration_ms(text)


def test_timestamps_iso_with_zone_without_zone_and_epoch() -> None:
    assert timestamp_ms("2026-01-01T00:00:00Z") == 1_767_225_600_000
    assert timestamp_ms("2026-01-01T01:00:00+01:00") == 1_767_225_600_000
    assert timestamp_ms("2026-01-01T00:00:00") == 1_767_225_600_000  # no zone: UTC
    assert timestamp_ms("1767225600000") == 1_767_225_600_000
    with pytest.raises(InvalidArgument):
        timestamp_ms("next tuesday")


def test_payload_may_follow_the_options() -> None:
    args = build_parser().parse_known_args(["produce", "t", "--in", "1s", "hi"])[0]
    assert args.payload is None  # argparse alone cannot place it; main() does
    assert args.trailing == "payload"


def test_unknown_arguments_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["produce", "t", "--in", "1s", "hi", "extra"])
    assert exc.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_broker_bound_flags_reach_the_config() -> None:
    from dejaq.broker.config import BrokerConfig
    from dejaq.driver.cli.broker_cmd import _limits

    argv = ["broker", "--max-streams", "3", "--max-frame-bytes", "1048576"]
    argv += ["--max-produce-messages", "50", "--max-produce-bytes", "2097152"]
    argv += ["--max-outbox-frames", "16", "--keepalive-ms", "2000", "--keepalive-timeout-ms", "900"]
    args = build_parser().parse_args(argv)
    config = BrokerConfig.from_sources(_limits(args), {})
    assert (config.max_streams, config.max_frame_bytes, config.max_produce_messages) == (
        3,
        1 << 20,
        50,
    )
    assert (config.max_produce_bytes, config.max_outbox_frames) == (2 << 20, 16)
    assert (config.keepalive_ms, config.keepalive_timeout_ms) == (2000, 900)
    held = build_parser().parse_args(["broker", "--max-held-bytes", "1048576"])
    assert BrokerConfig.from_sources(_limits(held), {}).max_held_bytes == 1 << 20
